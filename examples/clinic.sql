-- The veterinary clinic database of the clinic suite (examples/clinic.sqlite is built from
-- this file: sqlite3 examples/clinic.sqlite < examples/clinic.sql).
-- Dates are TEXT 'YYYY-MM-DD'; money is in euros; NULL means unknown (breed, dob, email) or,
-- for visit.paid_at, not paid yet.
CREATE TABLE owner (
    owner_id INTEGER PRIMARY KEY,
    first_name TEXT NOT NULL,
    last_name TEXT NOT NULL,
    phone TEXT NOT NULL,
    email TEXT,                 -- NULL when the owner gave none
    city TEXT NOT NULL,
    created_at TEXT NOT NULL    -- registration date at the clinic
);
CREATE TABLE pet (
    pet_id INTEGER PRIMARY KEY,
    owner_id INTEGER NOT NULL REFERENCES owner(owner_id),
    name TEXT NOT NULL,
    species TEXT NOT NULL,      -- dog, cat, rabbit, bird, reptile, guinea pig
    breed TEXT,                 -- NULL for mixed or unknown breed
    dob TEXT,                   -- date of birth, NULL when unknown
    weight_kg REAL NOT NULL,    -- at the last weighing
    is_neutered INTEGER NOT NULL DEFAULT 0  -- 1 = neutered
);
CREATE TABLE vet (
    vet_id INTEGER PRIMARY KEY,
    full_name TEXT NOT NULL,
    specialty TEXT NOT NULL,
    hired_on TEXT NOT NULL
);
CREATE TABLE visit (
    visit_id INTEGER PRIMARY KEY,
    pet_id INTEGER NOT NULL REFERENCES pet(pet_id),
    vet_id INTEGER NOT NULL REFERENCES vet(vet_id),
    visit_date TEXT NOT NULL,
    reason TEXT NOT NULL,
    fee REAL NOT NULL,          -- consultation fee, treatments not included
    paid_at TEXT                -- NULL = not paid yet
);
CREATE TABLE treatment (
    trt_id INTEGER PRIMARY KEY,
    code TEXT NOT NULL UNIQUE,
    descr TEXT NOT NULL,
    unit_price REAL NOT NULL
);
CREATE TABLE visit_treatment (  -- which treatments were given at which visit
    visit_id INTEGER NOT NULL REFERENCES visit(visit_id),
    trt_id INTEGER NOT NULL REFERENCES treatment(trt_id),
    qty INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (visit_id, trt_id)
);
INSERT INTO owner (owner_id, first_name, last_name, phone, email, city, created_at) VALUES
    (1, 'Marta', 'Kowalski', '06-3318-2044', 'marta.k@mailbox.example', 'Utrecht', '2021-03-14'),
    (2, 'Daniel', 'Okafor', '06-7702-1183', NULL, 'Amersfoort', '2019-11-02'),
    (3, 'Sofia', 'Lindqvist', '06-2290-5617', 'sofia.lindqvist@mailbox.example', 'Utrecht', '2022-06-20'),
    (4, 'Pieter', 'de Vries', '06-4821-7730', 'pdevries@webpost.example', 'Zeist', '2018-01-09'),
    (5, 'Hannah', 'Meyer', '06-5134-0962', 'hannah.meyer@webpost.example', 'Utrecht', '2023-02-27'),
    (6, 'Tomas', 'Ruiz', '06-8845-3371', NULL, 'Nieuwegein', '2020-08-15'),
    (7, 'Aisha', 'Rahman', '06-1967-4408', 'aisha.r@mailbox.example', 'Zeist', '2024-04-03'),
    (8, 'George', 'Bennett', '06-6053-2219', 'gbennett@webpost.example', 'Utrecht', '2017-05-30'),
    (9, 'Lena', 'Vogel', '06-3480-7725', 'lena.vogel@mailbox.example', 'Houten', '2022-10-11'),
    (10, 'Kenji', 'Watanabe', '06-9216-5580', 'kenji.w@webpost.example', 'Amersfoort', '2025-01-19'),
    (11, 'Ruth', 'Abramowitz', '06-2704-6639', NULL, 'Utrecht', '2016-09-07'),
    (12, 'Omar', 'Haddad', '06-7438-1902', 'omar.haddad@mailbox.example', 'Houten', '2024-12-01');
INSERT INTO pet (pet_id, owner_id, name, species, breed, dob, weight_kg, is_neutered) VALUES
    (1, 1, 'Biscuit', 'dog', 'Beagle', '2019-04-12', 12.4, 1),
    (2, 1, 'Luna', 'cat', 'British Shorthair', '2020-07-01', 4.8, 1),
    (3, 1, 'Mochi', 'rabbit', NULL, '2022-03-15', 1.9, 0),
    (4, 2, 'Rex', 'dog', 'German Shepherd', '2016-02-20', 34.0, 1),
    (5, 3, 'Pepper', 'cat', NULL, NULL, 3.6, 1),
    (6, 3, 'Kiwi', 'bird', 'Budgerigar', '2023-05-05', 0.04, 0),
    (7, 4, 'Bruno', 'dog', 'Labrador Retriever', '2018-09-30', 29.5, 1),
    (8, 4, 'Daisy', 'dog', 'Dachshund', '2021-01-17', 8.2, 1),
    (9, 5, 'Nala', 'cat', 'Maine Coon', '2021-11-23', 6.9, 1),
    (10, 6, 'Shelly', 'reptile', 'Hermann tortoise', '2010-06-01', 1.2, 0),
    (11, 6, 'Max', 'dog', 'Border Collie', '2017-12-05', 19.8, 1),
    (12, 7, 'Oscar', 'cat', 'Siamese', '2015-08-14', 4.1, 1),
    (13, 8, 'Coco', 'dog', 'Poodle', '2020-02-29', 7.5, 1),
    (14, 8, 'Simba', 'cat', NULL, '2019-10-10', 5.5, 1),
    (15, 9, 'Thor', 'dog', 'Great Dane', '2022-04-04', 58.0, 1),
    (16, 10, 'Pip', 'guinea pig', NULL, '2024-01-20', 0.9, 0),
    (17, 11, 'Milo', 'cat', 'Ragdoll', '2013-03-03', 5.9, 1),
    (18, 11, 'Bella', 'dog', 'Cavalier King Charles Spaniel', '2014-07-22', 9.1, 1),
    (19, 12, 'Ziggy', 'reptile', 'Bearded dragon', '2021-09-09', 0.45, 0),
    (20, 5, 'Rosie', 'dog', 'Cocker Spaniel', NULL, 13.7, 0);
INSERT INTO vet (vet_id, full_name, specialty, hired_on) VALUES
    (1, 'Ingrid Bakker', 'surgery', '2012-04-01'),
    (2, 'Samuel Osei', 'general practice', '2016-09-15'),
    (3, 'Yuki Tanaka', 'exotics', '2019-02-01'),
    (4, 'Clara Jansen', 'dentistry', '2020-06-10'),
    (5, 'Mateo Rossi', 'general practice', '2023-01-09'),
    (6, 'Freya Holm', 'dermatology', '2025-06-23'),
    (7, 'Noor El-Amrani', 'general practice', '2021-03-01'),
    (8, 'Henrik Lund', 'orthopedics', '2018-05-14');
INSERT INTO visit (visit_id, pet_id, vet_id, visit_date, reason, fee, paid_at) VALUES
    (1, 1, 2, '2025-01-08', 'annual check-up', 48.00, '2025-01-08'),
    (2, 4, 1, '2025-01-13', 'limping hind leg', 62.00, '2025-01-20'),
    (3, 2, 2, '2025-01-21', 'vaccination', 48.00, '2025-01-21'),
    (4, 6, 3, '2025-01-29', 'feather plucking', 55.00, '2025-02-03'),
    (5, 9, 5, '2025-02-04', 'vomiting', 48.00, '2025-02-04'),
    (6, 7, 2, '2025-02-11', 'ear infection', 48.00, '2025-02-11'),
    (7, 15, 1, '2025-02-18', 'neutering', 75.00, '2025-02-25'),
    (8, 10, 3, '2025-02-24', 'shell check', 55.00, NULL),
    (9, 13, 4, '2025-03-03', 'dental cleaning', 60.00, '2025-03-03'),
    (10, 4, 1, '2025-03-06', 'follow-up x-ray', 62.00, '2025-03-06'),
    (11, 17, 2, '2025-03-10', 'weight loss', 48.00, '2025-03-12'),
    (12, 3, 3, '2025-03-14', 'overgrown teeth', 55.00, '2025-03-14'),
    (13, 11, 7, '2025-03-19', 'vaccination', 48.00, '2025-03-19'),
    (14, 18, 4, '2025-03-25', 'dental cleaning', 60.00, NULL),
    (15, 12, 2, '2025-03-31', 'annual check-up', 48.00, '2025-03-31'),
    (16, 8, 1, '2025-04-02', 'neutering', 75.00, '2025-04-09'),
    (17, 19, 3, '2025-04-07', 'not eating', 55.00, '2025-04-07'),
    (18, 14, 5, '2025-04-10', 'flea infestation', 48.00, '2025-04-10'),
    (19, 1, 1, '2025-04-15', 'cut paw', 62.00, '2025-04-15'),
    (20, 16, 3, '2025-04-22', 'sneezing', 55.00, NULL),
    (21, 20, 2, '2025-04-28', 'vaccination', 48.00, '2025-04-28'),
    (22, 7, 4, '2025-05-05', 'broken tooth', 60.00, '2025-05-06'),
    (23, 5, 7, '2025-05-08', 'vaccination', 48.00, '2025-05-08'),
    (24, 9, 2, '2025-05-13', 'follow-up', 30.00, '2025-05-13'),
    (25, 15, 2, '2025-05-20', 'vaccination', 48.00, NULL),
    (26, 2, 4, '2025-05-27', 'bad breath', 60.00, '2025-05-27'),
    (27, 17, 8, '2025-06-02', 'lump removal', 75.00, '2025-06-10'),
    (28, 4, 8, '2025-06-05', 'arthritis check', 48.00, '2025-06-05'),
    (29, 11, 2, '2025-06-11', 'itchy skin', 48.00, NULL),
    (30, 7, 2, '2025-06-16', 'vaccination', 48.00, '2025-06-16');
INSERT INTO treatment (trt_id, code, descr, unit_price) VALUES
    (1, 'VAC-R', 'rabies vaccine', 38.00),
    (2, 'VAC-DHP', 'dog combination vaccine (distemper, hepatitis, parvovirus)', 42.50),
    (3, 'VAC-FEL', 'cat combination vaccine', 39.00),
    (4, 'DEWORM', 'deworming tablet', 9.75),
    (5, 'FLEA', 'flea spot-on treatment', 16.40),
    (6, 'XRAY', 'x-ray image', 85.00),
    (7, 'BLOOD', 'blood panel', 64.00),
    (8, 'DENT', 'dental cleaning under anaesthesia', 175.00),
    (9, 'SUT', 'wound suturing', 95.00),
    (10, 'ANTIB', 'antibiotics course', 22.30),
    (11, 'NEUT-C', 'cat neutering', 120.00),
    (12, 'NEUT-D', 'dog neutering', 210.00),
    (13, 'ULTRA', 'ultrasound scan', 110.00);
INSERT INTO visit_treatment (visit_id, trt_id, qty) VALUES
    (1, 2, 1), (1, 4, 1),
    (2, 6, 2),
    (3, 3, 1),
    (4, 7, 1),
    (5, 7, 1), (5, 10, 1),
    (6, 10, 1),
    (7, 12, 1),
    (9, 8, 1),
    (10, 6, 1),
    (11, 7, 1), (11, 13, 1),
    (12, 8, 1),
    (13, 2, 1), (13, 1, 1),
    (14, 8, 1),
    (15, 3, 1),
    (16, 12, 1),
    (17, 7, 1),
    (18, 5, 2),
    (19, 9, 1), (19, 10, 1),
    (21, 2, 1), (21, 4, 2),
    (22, 6, 1), (22, 8, 1),
    (23, 3, 1),
    (25, 1, 1), (25, 2, 1),
    (26, 8, 1),
    (27, 9, 1), (27, 7, 1),
    (28, 6, 1),
    (29, 5, 1), (29, 10, 1),
    (30, 1, 1), (30, 4, 1);
