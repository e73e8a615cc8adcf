-- The HR and payroll records of a small software company, for the office suite
-- (examples/office.sqlite is built from this file: sqlite3 examples/office.sqlite < examples/office.sql).
-- Tables are named the way a Django project names them: app prefix, singular, lower snake_case,
-- an integer `id` key and `<thing>_id` foreign keys. Dates are TEXT 'YYYY-MM-DD'; money is in euros.
CREATE TABLE hr_department (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    floor INTEGER NOT NULL,
    head_id INTEGER REFERENCES hr_employee(id)  -- the head of the department
);
CREATE TABLE hr_employee (
    id INTEGER PRIMARY KEY,
    first_name TEXT NOT NULL,
    last_name TEXT NOT NULL,
    department_id INTEGER NOT NULL REFERENCES hr_department(id),
    job_title TEXT NOT NULL,
    hired_on TEXT NOT NULL,
    left_on TEXT,                   -- NULL while the employee still works here
    contract_hours INTEGER NOT NULL, -- hours per week; 40 is full time
    monthly_salary REAL NOT NULL,   -- gross, in euros
    manager_id INTEGER REFERENCES hr_employee(id)  -- NULL for the managing director
);
CREATE TABLE hr_leaverequest (
    id INTEGER PRIMARY KEY,
    employee_id INTEGER NOT NULL REFERENCES hr_employee(id),
    kind TEXT NOT NULL,             -- annual, sick, unpaid
    start_date TEXT NOT NULL,
    end_date TEXT NOT NULL,
    days INTEGER NOT NULL,          -- working days taken
    status TEXT NOT NULL            -- approved, pending, rejected
);
CREATE TABLE payroll_timesheet (
    id INTEGER PRIMARY KEY,
    employee_id INTEGER NOT NULL REFERENCES hr_employee(id),
    week_start TEXT NOT NULL,       -- the Monday of the week
    regular_hours REAL NOT NULL,
    overtime_hours REAL NOT NULL,   -- hours beyond the contract, Sundays not included
    sunday_hours REAL NOT NULL      -- hours worked on the Sunday, counted in neither of the other two
);
CREATE TABLE expenses_claim (
    id INTEGER PRIMARY KEY,
    employee_id INTEGER NOT NULL REFERENCES hr_employee(id),
    submitted_on TEXT NOT NULL,
    category TEXT NOT NULL,         -- mileage, meals, equipment, travel
    description TEXT NOT NULL,
    km REAL,                        -- kilometres driven; only for mileage
    amount REAL,                    -- euros claimed; NULL for mileage, which payroll works out from km
    status TEXT NOT NULL            -- paid, pending, rejected
);
CREATE TABLE training_course (
    id INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    cost REAL NOT NULL,             -- per participant
    hours INTEGER NOT NULL
);
CREATE TABLE training_enrolment (
    id INTEGER PRIMARY KEY,
    employee_id INTEGER NOT NULL REFERENCES hr_employee(id),
    course_id INTEGER NOT NULL REFERENCES training_course(id),
    enrolled_on TEXT NOT NULL,
    completed_on TEXT               -- NULL until the course is completed
);
INSERT INTO hr_department VALUES (1, 'Engineering', 3, 2);
INSERT INTO hr_department VALUES (2, 'Sales', 1, 10);
INSERT INTO hr_department VALUES (3, 'Finance', 2, 17);
INSERT INTO hr_department VALUES (4, 'Customer Support', 1, 22);
INSERT INTO hr_department VALUES (5, 'People and Operations', 2, 29);
INSERT INTO hr_employee VALUES (1, 'Marleen', 'de Vries', 5, 'Managing Director', '2012-09-01', NULL, 40, 8200, NULL);
INSERT INTO hr_employee VALUES (2, 'Jeroen', 'Bakker', 1, 'Head of Engineering', '2014-03-01', NULL, 40, 6400, 1);
INSERT INTO hr_employee VALUES (3, 'Priya', 'Raman', 1, 'Senior Developer', '2018-06-11', NULL, 40, 5190, 2);
INSERT INTO hr_employee VALUES (4, 'Tom', 'Hendriks', 1, 'Developer', '2021-02-01', NULL, 40, 4152, 2);
INSERT INTO hr_employee VALUES (5, 'Zoë', 'Vermeulen', 1, 'Developer', '2022-09-05', NULL, 32, 3460, 2);
INSERT INTO hr_employee VALUES (6, 'Karim', 'El Amrani', 1, 'Developer', '2023-04-03', NULL, 40, 3806, 2);
INSERT INTO hr_employee VALUES (7, 'Lucas', 'Meijer', 1, 'Junior Developer', '2025-02-03', NULL, 40, 3114, 2);
INSERT INTO hr_employee VALUES (8, 'Sofia', 'Rossi', 1, 'QA Engineer', '2019-10-14', NULL, 40, 4325, 2);
INSERT INTO hr_employee VALUES (9, 'Bram', 'Visser', 1, 'DevOps Engineer', '2020-01-06', '2025-04-30', 40, 4671, 2);
INSERT INTO hr_employee VALUES (10, 'Hanna', 'Kowalczyk', 2, 'Head of Sales', '2016-05-02', NULL, 40, 5800, 1);
INSERT INTO hr_employee VALUES (11, 'Ruben', 'Dijkstra', 2, 'Account Manager', '2019-03-18', NULL, 40, 4100, 10);
INSERT INTO hr_employee VALUES (12, 'Siobhan', 'O''Neill', 2, 'Account Manager', '2021-08-23', NULL, 40, 4050, 10);
INSERT INTO hr_employee VALUES (13, 'Mehmet', 'Kaya', 2, 'Sales Representative', '2023-01-09', NULL, 40, 3500, 10);
INSERT INTO hr_employee VALUES (14, 'Eva', 'Lindgren', 2, 'Sales Representative', '2024-03-04', NULL, 24, 2100, 10);
INSERT INTO hr_employee VALUES (15, 'Niels', 'Mulder', 2, 'Sales Representative', '2020-11-02', '2025-02-28', 40, 3650, 10);
INSERT INTO hr_employee VALUES (16, 'Fleur', 'Peters', 2, 'Sales Assistant', '2025-03-17', NULL, 32, 2640, 10);
INSERT INTO hr_employee VALUES (17, 'Ilse', 'Brouwer', 3, 'Head of Finance', '2015-01-12', NULL, 40, 5900, 1);
INSERT INTO hr_employee VALUES (18, 'Arjun', 'Mehta', 3, 'Accountant', '2019-09-02', NULL, 40, 4200, 17);
INSERT INTO hr_employee VALUES (19, 'Anouk', 'Smits', 3, 'Payroll Administrator', '2017-04-03', NULL, 32, 3200, 17);
INSERT INTO hr_employee VALUES (20, 'Daniel', 'Weber', 3, 'Accounts Assistant', '2024-06-10', NULL, 24, 1950, 17);
INSERT INTO hr_employee VALUES (21, 'Chloé', 'Lambert', 3, 'Controller', '2022-01-10', NULL, 40, 4800, 17);
INSERT INTO hr_employee VALUES (22, 'Joris', 'van Leeuwen', 4, 'Head of Support', '2017-09-04', NULL, 40, 4900, 1);
INSERT INTO hr_employee VALUES (23, 'Maaike', 'Bos', 4, 'Support Specialist', '2020-02-17', NULL, 40, 3460, 22);
INSERT INTO hr_employee VALUES (24, 'Yusuf', 'Demir', 4, 'Support Specialist', '2021-05-10', NULL, 40, 3460, 22);
INSERT INTO hr_employee VALUES (25, 'Lena', 'Fischer', 4, 'Support Specialist', '2022-11-14', NULL, 32, 2768, 22);
INSERT INTO hr_employee VALUES (26, 'Pedro', 'Santos', 4, 'Support Agent', '2023-07-03', NULL, 40, 3114, 22);
INSERT INTO hr_employee VALUES (27, 'Noor', 'Hassan', 4, 'Support Agent', '2024-01-15', NULL, 24, 1868.4, 22);
INSERT INTO hr_employee VALUES (28, 'Wouter', 'Jacobs', 4, 'Support Agent', '2025-01-06', NULL, 40, 3114, 22);
INSERT INTO hr_employee VALUES (29, 'Ellen', 'Vos', 5, 'Head of People and Operations', '2016-10-03', NULL, 40, 5400, 1);
INSERT INTO hr_employee VALUES (30, 'Sanne', 'Koster', 5, 'HR Advisor', '2020-06-01', NULL, 32, 3520, 29);
INSERT INTO hr_employee VALUES (31, 'Gijs', 'Hoekstra', 5, 'Office Manager', '2018-02-05', NULL, 40, 3700, 29);
INSERT INTO hr_employee VALUES (32, 'Ana', 'Martins', 5, 'Receptionist', '2023-09-18', NULL, 24, 1800, 31);
INSERT INTO hr_employee VALUES (33, 'Thijs', 'de Boer', 1, 'Developer', '2024-09-02', NULL, 40, 3806, 2);
INSERT INTO hr_employee VALUES (34, 'Mila', 'Janssen', 2, 'Account Manager', '2025-05-12', NULL, 40, 3900, 10);
INSERT INTO hr_leaverequest VALUES (1, 4, 'annual', '2025-01-20', '2025-01-24', 5, 'approved');
INSERT INTO hr_leaverequest VALUES (2, 23, 'sick', '2025-01-27', '2025-01-29', 3, 'approved');
INSERT INTO hr_leaverequest VALUES (3, 11, 'annual', '2025-02-17', '2025-02-21', 5, 'approved');
INSERT INTO hr_leaverequest VALUES (4, 19, 'annual', '2025-02-24', '2025-02-26', 3, 'approved');
INSERT INTO hr_leaverequest VALUES (5, 6, 'sick', '2025-03-03', '2025-03-04', 2, 'approved');
INSERT INTO hr_leaverequest VALUES (6, 20, 'annual', '2025-03-10', '2025-03-11', 2, 'approved');
INSERT INTO hr_leaverequest VALUES (7, 12, 'unpaid', '2025-03-24', '2025-03-28', 5, 'approved');
INSERT INTO hr_leaverequest VALUES (8, 30, 'sick', '2025-04-01', '2025-04-01', 1, 'approved');
INSERT INTO hr_leaverequest VALUES (9, 26, 'annual', '2025-04-14', '2025-04-17', 4, 'approved');
INSERT INTO hr_leaverequest VALUES (10, 5, 'annual', '2025-04-22', '2025-04-25', 4, 'approved');
INSERT INTO hr_leaverequest VALUES (11, 9, 'annual', '2025-04-28', '2025-04-29', 2, 'approved');
INSERT INTO hr_leaverequest VALUES (12, 3, 'annual', '2025-05-12', '2025-05-16', 5, 'approved');
INSERT INTO hr_leaverequest VALUES (13, 13, 'sick', '2025-05-19', '2025-05-23', 5, 'approved');
INSERT INTO hr_leaverequest VALUES (14, 8, 'annual', '2025-05-26', '2025-05-28', 3, 'approved');
INSERT INTO hr_leaverequest VALUES (15, 24, 'annual', '2025-06-02', '2025-06-06', 5, 'rejected');
INSERT INTO hr_leaverequest VALUES (16, 18, 'sick', '2025-06-10', '2025-06-11', 2, 'approved');
INSERT INTO hr_leaverequest VALUES (17, 24, 'annual', '2025-06-16', '2025-06-20', 5, 'approved');
INSERT INTO hr_leaverequest VALUES (18, 21, 'sick', '2025-06-23', '2025-06-27', 5, 'approved');
INSERT INTO hr_leaverequest VALUES (19, 31, 'annual', '2025-07-07', '2025-07-18', 10, 'approved');
INSERT INTO hr_leaverequest VALUES (20, 10, 'annual', '2025-07-21', '2025-08-01', 10, 'approved');
INSERT INTO hr_leaverequest VALUES (21, 14, 'unpaid', '2025-07-28', '2025-07-30', 3, 'pending');
INSERT INTO hr_leaverequest VALUES (22, 25, 'annual', '2025-08-04', '2025-08-08', 5, 'pending');
INSERT INTO hr_leaverequest VALUES (23, 33, 'annual', '2025-08-11', '2025-08-15', 5, 'pending');
INSERT INTO hr_leaverequest VALUES (24, 2, 'annual', '2025-08-18', '2025-08-29', 10, 'approved');
INSERT INTO hr_leaverequest VALUES (25, 28, 'annual', '2025-08-25', '2025-08-27', 3, 'rejected');
INSERT INTO hr_leaverequest VALUES (26, 16, 'annual', '2025-09-01', '2025-09-05', 5, 'pending');
INSERT INTO payroll_timesheet VALUES (1, 23, '2025-03-03', 40, 2, 0);
INSERT INTO payroll_timesheet VALUES (2, 24, '2025-03-03', 40, 0, 0);
INSERT INTO payroll_timesheet VALUES (3, 25, '2025-03-03', 32, 0, 0);
INSERT INTO payroll_timesheet VALUES (4, 26, '2025-03-03', 40, 3, 0);
INSERT INTO payroll_timesheet VALUES (5, 27, '2025-03-03', 24, 0, 0);
INSERT INTO payroll_timesheet VALUES (6, 28, '2025-03-03', 40, 1, 0);
INSERT INTO payroll_timesheet VALUES (7, 23, '2025-03-10', 40, 4, 0);
INSERT INTO payroll_timesheet VALUES (8, 24, '2025-03-10', 40, 2, 0);
INSERT INTO payroll_timesheet VALUES (9, 25, '2025-03-10', 32, 0, 0);
INSERT INTO payroll_timesheet VALUES (10, 26, '2025-03-10', 40, 0, 6);
INSERT INTO payroll_timesheet VALUES (11, 27, '2025-03-10', 24, 0, 0);
INSERT INTO payroll_timesheet VALUES (12, 28, '2025-03-10', 40, 2, 0);
INSERT INTO payroll_timesheet VALUES (13, 3, '2025-03-10', 40, 4, 0);
INSERT INTO payroll_timesheet VALUES (14, 4, '2025-03-10', 40, 6, 4);
INSERT INTO payroll_timesheet VALUES (15, 6, '2025-03-10', 40, 3, 0);
INSERT INTO payroll_timesheet VALUES (16, 8, '2025-03-10', 40, 0, 0);
INSERT INTO payroll_timesheet VALUES (17, 33, '2025-03-10', 40, 2, 0);
INSERT INTO payroll_timesheet VALUES (18, 23, '2025-03-17', 40, 0, 0);
INSERT INTO payroll_timesheet VALUES (19, 24, '2025-03-17', 40, 5, 0);
INSERT INTO payroll_timesheet VALUES (20, 25, '2025-03-17', 32, 2, 0);
INSERT INTO payroll_timesheet VALUES (21, 26, '2025-03-17', 40, 2, 0);
INSERT INTO payroll_timesheet VALUES (22, 27, '2025-03-17', 24, 0, 0);
INSERT INTO payroll_timesheet VALUES (23, 28, '2025-03-17', 40, 0, 6);
INSERT INTO payroll_timesheet VALUES (24, 23, '2025-03-24', 40, 3, 0);
INSERT INTO payroll_timesheet VALUES (25, 24, '2025-03-24', 40, 1, 0);
INSERT INTO payroll_timesheet VALUES (26, 25, '2025-03-24', 32, 0, 0);
INSERT INTO payroll_timesheet VALUES (27, 26, '2025-03-24', 40, 4, 0);
INSERT INTO payroll_timesheet VALUES (28, 27, '2025-03-24', 24, 2, 0);
INSERT INTO payroll_timesheet VALUES (29, 28, '2025-03-24', 40, 3, 0);
INSERT INTO payroll_timesheet VALUES (30, 3, '2025-03-24', 40, 2, 0);
INSERT INTO payroll_timesheet VALUES (31, 4, '2025-03-24', 40, 3, 0);
INSERT INTO payroll_timesheet VALUES (32, 6, '2025-03-24', 40, 8, 0);
INSERT INTO payroll_timesheet VALUES (33, 8, '2025-03-24', 40, 2, 0);
INSERT INTO payroll_timesheet VALUES (34, 33, '2025-03-24', 40, 0, 0);
INSERT INTO payroll_timesheet VALUES (35, 23, '2025-03-31', 40, 6, 0);
INSERT INTO payroll_timesheet VALUES (36, 24, '2025-03-31', 40, 0, 6);
INSERT INTO payroll_timesheet VALUES (37, 25, '2025-03-31', 32, 1, 0);
INSERT INTO payroll_timesheet VALUES (38, 26, '2025-03-31', 40, 2, 0);
INSERT INTO payroll_timesheet VALUES (39, 27, '2025-03-31', 24, 0, 0);
INSERT INTO payroll_timesheet VALUES (40, 28, '2025-03-31', 40, 2, 0);
INSERT INTO payroll_timesheet VALUES (41, 3, '2025-04-07', 40, 5, 0);
INSERT INTO payroll_timesheet VALUES (42, 4, '2025-04-07', 40, 2, 0);
INSERT INTO payroll_timesheet VALUES (43, 6, '2025-04-07', 40, 7, 0);
INSERT INTO payroll_timesheet VALUES (44, 8, '2025-04-07', 40, 0, 0);
INSERT INTO payroll_timesheet VALUES (45, 33, '2025-04-07', 40, 4, 0);
INSERT INTO expenses_claim VALUES (1, 11, '2025-01-14', 'mileage', 'client visit in Amersfoort', 96, NULL, 'paid');
INSERT INTO expenses_claim VALUES (2, 12, '2025-01-22', 'mileage', 'client visit in Rotterdam', 124, NULL, 'paid');
INSERT INTO expenses_claim VALUES (3, 10, '2025-02-03', 'travel', 'train to Brussels', NULL, 142.6, 'paid');
INSERT INTO expenses_claim VALUES (4, 11, '2025-02-11', 'meals', 'lunch with a client', NULL, 31.4, 'paid');
INSERT INTO expenses_claim VALUES (5, 4, '2025-02-19', 'equipment', 'USB-C dock', NULL, 189, 'paid');
INSERT INTO expenses_claim VALUES (6, 13, '2025-02-26', 'mileage', 'trade fair in Utrecht', 38, NULL, 'paid');
INSERT INTO expenses_claim VALUES (7, 22, '2025-03-05', 'equipment', 'headsets for the support team', NULL, 460, 'paid');
INSERT INTO expenses_claim VALUES (8, 32, '2025-03-12', 'equipment', 'office chair', NULL, 640, 'paid');
INSERT INTO expenses_claim VALUES (9, 12, '2025-03-18', 'meals', 'dinner at the trade fair', NULL, 27.8, 'paid');
INSERT INTO expenses_claim VALUES (10, 10, '2025-03-25', 'travel', 'flight to Copenhagen', NULL, 318, 'paid');
INSERT INTO expenses_claim VALUES (11, 11, '2025-04-09', 'meals', 'lunch with a client', NULL, 48.5, 'pending');
INSERT INTO expenses_claim VALUES (12, 3, '2025-04-15', 'travel', 'conference in Berlin', NULL, 405.2, 'paid');
INSERT INTO expenses_claim VALUES (13, 14, '2025-04-22', 'mileage', 'client visit in Zwolle', 212, NULL, 'paid');
INSERT INTO expenses_claim VALUES (14, 9, '2025-04-24', 'travel', 'taxi after the server move', NULL, 58.9, 'paid');
INSERT INTO expenses_claim VALUES (15, 5, '2025-04-29', 'equipment', 'second monitor', NULL, 279, 'rejected');
INSERT INTO expenses_claim VALUES (16, 13, '2025-05-06', 'mileage', 'client visit in Arnhem', 134, NULL, 'paid');
INSERT INTO expenses_claim VALUES (17, 12, '2025-05-14', 'mileage', 'client visits in Rotterdam and Delft', 186, NULL, 'pending');
INSERT INTO expenses_claim VALUES (18, 21, '2025-05-20', 'meals', 'lunch at the auditors', NULL, 22.5, 'paid');
INSERT INTO expenses_claim VALUES (19, 2, '2025-05-27', 'equipment', 'test phones', NULL, 1120, 'paid');
INSERT INTO expenses_claim VALUES (20, 34, '2025-06-02', 'mileage', 'client visit in Eindhoven', 176, NULL, 'pending');
INSERT INTO expenses_claim VALUES (21, 30, '2025-06-04', 'travel', 'train to the HR congress', NULL, 64.4, 'paid');
INSERT INTO expenses_claim VALUES (22, 16, '2025-06-10', 'meals', 'lunch at the trade fair', NULL, 18.9, 'pending');
INSERT INTO expenses_claim VALUES (23, 6, '2025-06-12', 'equipment', 'keyboard', NULL, 129, 'pending');
INSERT INTO expenses_claim VALUES (24, 31, '2025-06-17', 'equipment', 'coffee machine for the kitchen', NULL, 780, 'pending');
INSERT INTO expenses_claim VALUES (25, 10, '2025-06-19', 'travel', 'hotel in Hamburg', NULL, 236, 'pending');
INSERT INTO training_course VALUES (1, 'First Aid at Work', 295, 8);
INSERT INTO training_course VALUES (2, 'Advanced SQL', 650, 16);
INSERT INTO training_course VALUES (3, 'Negotiation Skills', 480, 12);
INSERT INTO training_course VALUES (4, 'Time Management', 240, 6);
INSERT INTO training_course VALUES (5, 'Cloud Security Basics', 890, 24);
INSERT INTO training_course VALUES (6, 'Dutch for Beginners', 420, 30);
INSERT INTO training_enrolment VALUES (1, 8, 2, '2025-01-13', '2025-02-21');
INSERT INTO training_enrolment VALUES (2, 4, 2, '2025-01-13', '2025-02-21');
INSERT INTO training_enrolment VALUES (3, 18, 2, '2025-01-13', '2025-02-21');
INSERT INTO training_enrolment VALUES (4, 12, 6, '2025-01-20', '2025-05-30');
INSERT INTO training_enrolment VALUES (5, 6, 5, '2025-02-10', '2025-04-25');
INSERT INTO training_enrolment VALUES (6, 3, 5, '2025-02-10', '2025-04-25');
INSERT INTO training_enrolment VALUES (7, 11, 3, '2025-02-17', '2025-03-28');
INSERT INTO training_enrolment VALUES (8, 12, 3, '2025-02-17', '2025-03-28');
INSERT INTO training_enrolment VALUES (9, 8, 4, '2025-03-03', '2025-03-14');
INSERT INTO training_enrolment VALUES (10, 25, 4, '2025-03-03', '2025-03-14');
INSERT INTO training_enrolment VALUES (11, 31, 1, '2025-03-10', '2025-03-10');
INSERT INTO training_enrolment VALUES (12, 30, 1, '2025-03-10', '2025-03-10');
INSERT INTO training_enrolment VALUES (13, 23, 1, '2025-03-10', '2025-03-10');
INSERT INTO training_enrolment VALUES (14, 32, 1, '2025-03-10', '2025-03-10');
INSERT INTO training_enrolment VALUES (15, 14, 6, '2025-04-01', NULL);
INSERT INTO training_enrolment VALUES (16, 6, 2, '2025-04-07', NULL);
INSERT INTO training_enrolment VALUES (17, 19, 4, '2025-04-14', NULL);
INSERT INTO training_enrolment VALUES (18, 13, 3, '2025-05-05', NULL);
INSERT INTO training_enrolment VALUES (19, 28, 4, '2025-05-12', NULL);
INSERT INTO training_enrolment VALUES (20, 26, 1, '2025-05-19', NULL);
