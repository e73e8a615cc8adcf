-- The car repair garage of the garage suite (examples/garage.sqlite is built from this file:
-- sqlite3 examples/garage.sqlite < examples/garage.sql). Names are short snake_case, as many
-- real databases have them; dates are TEXT 'YYYY-MM-DD'; money is in euros, before VAT.
CREATE TABLE cust (
    cust_id INTEGER PRIMARY KEY,
    fname TEXT NOT NULL,
    lname TEXT NOT NULL,
    city TEXT NOT NULL,
    phone TEXT,                     -- NULL when none was given
    since TEXT NOT NULL             -- the date the customer first came to us
);
CREATE TABLE vehicle (
    veh_id INTEGER PRIMARY KEY,
    cust_id INTEGER NOT NULL REFERENCES cust(cust_id),
    reg_no TEXT NOT NULL,
    make TEXT NOT NULL,
    model TEXT NOT NULL,
    yr INTEGER NOT NULL,            -- the year the car was built
    fuel TEXT NOT NULL,             -- petrol, diesel, electric, hybrid
    odo_km INTEGER NOT NULL         -- the odometer at the last visit
);
CREATE TABLE mech (
    mech_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    grade TEXT NOT NULL             -- apprentice, technician, master
);
CREATE TABLE job (
    job_id INTEGER PRIMARY KEY,
    veh_id INTEGER NOT NULL REFERENCES vehicle(veh_id),
    mech_id INTEGER NOT NULL REFERENCES mech(mech_id),
    opened TEXT NOT NULL,
    closed TEXT,                    -- NULL while the job is open
    kind TEXT NOT NULL,             -- service, brakes, tyres, mot, repair, diagnosis
    labour_hrs REAL NOT NULL,
    status TEXT NOT NULL            -- open, done, paid
);
CREATE TABLE part (
    part_no TEXT PRIMARY KEY,
    descr TEXT NOT NULL,
    unit_cost REAL NOT NULL,        -- what the part costs us
    qty_on_hand INTEGER NOT NULL
);
CREATE TABLE job_part (
    job_id INTEGER NOT NULL REFERENCES job(job_id),
    part_no TEXT NOT NULL REFERENCES part(part_no),
    qty INTEGER NOT NULL,
    PRIMARY KEY (job_id, part_no)
);
INSERT INTO cust VALUES (1, 'Ines', 'Kowalski', 'Utrecht', '030-244-1187', '2019-05-14');
INSERT INTO cust VALUES (2, 'Tom', 'Berger', 'Amersfoort', '033-461-0092', '2021-02-03');
INSERT INTO cust VALUES (3, 'Amira', 'Haddad', 'Utrecht', NULL, '2023-09-21');
INSERT INTO cust VALUES (4, 'Lars', 'Eriksen', 'Zeist', '030-699-3410', '2018-11-30');
INSERT INTO cust VALUES (5, 'Chloe', 'Martin', 'Utrecht', '030-871-5526', '2024-06-11');
INSERT INTO cust VALUES (6, 'Rui', 'Costa', 'Houten', NULL, '2022-03-08');
INSERT INTO cust VALUES (7, 'Femke', 'de Jong', 'Zeist', '030-412-7781', '2020-07-19');
INSERT INTO cust VALUES (8, 'Bilal', 'Yilmaz', 'Amersfoort', '033-218-4450', '2025-01-27');
INSERT INTO cust VALUES (9, 'Nora', 'Lindqvist', 'Utrecht', '030-335-9012', '2017-04-02');
INSERT INTO cust VALUES (10, 'Paul', 'Okafor', 'Houten', '030-507-6638', '2024-10-05');
INSERT INTO vehicle VALUES (1, 1, 'KX-482-P', 'Volkswagen', 'Golf', 2016, 'petrol', 142300);
INSERT INTO vehicle VALUES (2, 2, 'TB-19-RL', 'Skoda', 'Octavia', 2019, 'diesel', 98750);
INSERT INTO vehicle VALUES (3, 3, 'HN-907-Z', 'Renault', 'Clio', 2021, 'petrol', 31200);
INSERT INTO vehicle VALUES (4, 4, 'GJ-33-VF', 'Volvo', 'V60', 2014, 'diesel', 211480);
INSERT INTO vehicle VALUES (5, 4, 'ZP-640-K', 'Tesla', 'Model 3', 2022, 'electric', 45900);
INSERT INTO vehicle VALUES (6, 5, 'LR-218-D', 'Toyota', 'Yaris', 2020, 'hybrid', 52310);
INSERT INTO vehicle VALUES (7, 6, 'DS-71-NB', 'Peugeot', '308', 2017, 'diesel', 167020);
INSERT INTO vehicle VALUES (8, 7, 'FV-556-T', 'Kia', 'Niro', 2023, 'electric', 18640);
INSERT INTO vehicle VALUES (9, 8, 'RS-04-JX', 'Ford', 'Focus', 2015, 'petrol', 176900);
INSERT INTO vehicle VALUES (10, 9, 'PM-882-H', 'BMW', '320d', 2018, 'diesel', 121330);
INSERT INTO vehicle VALUES (11, 10, 'VT-39-GG', 'Hyundai', 'i20', 2024, 'petrol', 9870);
INSERT INTO vehicle VALUES (12, 9, 'KB-115-S', 'Toyota', 'Corolla', 2021, 'hybrid', 60450);
INSERT INTO mech VALUES (1, 'Henk Visser', 'master');
INSERT INTO mech VALUES (2, 'Sanne Bakker', 'technician');
INSERT INTO mech VALUES (3, 'Youssef Amrani', 'technician');
INSERT INTO mech VALUES (4, 'Daan Smit', 'apprentice');
INSERT INTO job VALUES (1, 1, 2, '2025-03-03', '2025-03-03', 'service', 2.5, 'paid');
INSERT INTO job VALUES (2, 4, 1, '2025-03-05', '2025-03-07', 'repair', 6.0, 'paid');
INSERT INTO job VALUES (3, 2, 3, '2025-03-10', '2025-03-10', 'brakes', 1.75, 'paid');
INSERT INTO job VALUES (4, 7, 1, '2025-03-12', '2025-03-14', 'repair', 4.5, 'paid');
INSERT INTO job VALUES (5, 9, 4, '2025-03-18', '2025-03-18', 'mot', 1.0, 'paid');
INSERT INTO job VALUES (6, 6, 2, '2025-03-24', '2025-03-24', 'tyres', 1.0, 'paid');
INSERT INTO job VALUES (7, 10, 3, '2025-04-02', '2025-04-02', 'brakes', 2.0, 'paid');
INSERT INTO job VALUES (8, 3, 4, '2025-04-07', '2025-04-07', 'service', 1.5, 'paid');
INSERT INTO job VALUES (9, 5, 1, '2025-04-14', '2025-04-16', 'diagnosis', 3.0, 'done');
INSERT INTO job VALUES (10, 12, 2, '2025-04-22', '2025-04-22', 'service', 2.0, 'paid');
INSERT INTO job VALUES (11, 8, 3, '2025-05-06', '2025-05-06', 'tyres', 0.75, 'paid');
INSERT INTO job VALUES (12, 1, 1, '2025-05-12', '2025-05-15', 'repair', 7.5, 'done');
INSERT INTO job VALUES (13, 11, 4, '2025-05-20', '2025-05-20', 'service', 1.25, 'done');
INSERT INTO job VALUES (14, 4, 3, '2025-06-02', '2025-06-02', 'brakes', 2.25, 'done');
INSERT INTO job VALUES (15, 7, 2, '2025-06-09', NULL, 'repair', 5.0, 'open');
INSERT INTO job VALUES (16, 2, 4, '2025-06-10', NULL, 'mot', 1.0, 'open');
INSERT INTO job VALUES (17, 10, 1, '2025-06-11', NULL, 'diagnosis', 2.5, 'open');
INSERT INTO job VALUES (18, 9, 2, '2025-06-12', NULL, 'brakes', 1.5, 'open');
INSERT INTO part VALUES ('OF-220', 'oil filter', 9.5, 24);
INSERT INTO part VALUES ('EO-5W30', 'engine oil 5W-30, 1 litre', 7.2, 80);
INSERT INTO part VALUES ('BP-F118', 'front brake pads, set', 38.0, 12);
INSERT INTO part VALUES ('BD-F301', 'front brake disc', 54.0, 8);
INSERT INTO part VALUES ('TY-205', 'tyre 205/55 R16', 72.0, 20);
INSERT INTO part VALUES ('WB-14', 'wiper blade', 11.0, 30);
INSERT INTO part VALUES ('SP-4', 'spark plug', 6.5, 40);
INSERT INTO part VALUES ('TB-K9', 'timing belt kit', 189.0, 3);
INSERT INTO part VALUES ('AF-77', 'air filter', 14.0, 15);
INSERT INTO part VALUES ('BT-70', 'battery 70 Ah', 118.0, 5);
INSERT INTO job_part VALUES (1, 'OF-220', 1);
INSERT INTO job_part VALUES (1, 'EO-5W30', 5);
INSERT INTO job_part VALUES (1, 'AF-77', 1);
INSERT INTO job_part VALUES (2, 'TB-K9', 1);
INSERT INTO job_part VALUES (3, 'BP-F118', 1);
INSERT INTO job_part VALUES (4, 'BT-70', 1);
INSERT INTO job_part VALUES (6, 'TY-205', 4);
INSERT INTO job_part VALUES (7, 'BP-F118', 1);
INSERT INTO job_part VALUES (7, 'BD-F301', 2);
INSERT INTO job_part VALUES (8, 'OF-220', 1);
INSERT INTO job_part VALUES (8, 'EO-5W30', 4);
INSERT INTO job_part VALUES (10, 'OF-220', 1);
INSERT INTO job_part VALUES (10, 'EO-5W30', 4);
INSERT INTO job_part VALUES (10, 'SP-4', 4);
INSERT INTO job_part VALUES (11, 'TY-205', 2);
INSERT INTO job_part VALUES (12, 'TB-K9', 1);
INSERT INTO job_part VALUES (12, 'WB-14', 2);
INSERT INTO job_part VALUES (13, 'OF-220', 1);
INSERT INTO job_part VALUES (13, 'EO-5W30', 4);
INSERT INTO job_part VALUES (14, 'BP-F118', 1);
INSERT INTO job_part VALUES (14, 'BD-F301', 2);
