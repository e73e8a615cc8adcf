-- The town library database of the library suite (examples/library.sqlite is built from
-- this file: sqlite3 examples/library.sqlite < examples/library.sql).
-- Dates are TEXT 'YYYY-MM-DD'; money is in euros. A loan with returned_date NULL is still
-- out; a fine with paid_on NULL is unpaid; a book with author_id NULL has no named author.
CREATE TABLE branches (
    branch_code TEXT PRIMARY KEY,   -- CEN, NOR, RIV, HIL, EAS, WES, STA, MOB
    branch_name TEXT NOT NULL,
    street_addr TEXT NOT NULL,
    opened_yr INTEGER NOT NULL
);
CREATE TABLE authors (
    author_id INTEGER PRIMARY KEY,
    author_name TEXT NOT NULL,
    birth_yr INTEGER,               -- NULL when unknown
    country TEXT NOT NULL
);
CREATE TABLE books (
    book_id INTEGER PRIMARY KEY,
    isbn TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    author_id INTEGER REFERENCES authors(author_id),
    genre TEXT NOT NULL,
    pub_yr INTEGER NOT NULL,
    pages INTEGER NOT NULL,
    branch_code TEXT NOT NULL REFERENCES branches(branch_code),  -- the branch holding the copies
    copies INTEGER NOT NULL,
    repl_cost REAL NOT NULL         -- replacement cost of one copy
);
CREATE TABLE members (
    member_no INTEGER PRIMARY KEY,
    first_nm TEXT NOT NULL,
    last_nm TEXT NOT NULL,
    dob TEXT NOT NULL,
    email TEXT,                     -- NULL when the member gave none
    home_branch TEXT NOT NULL REFERENCES branches(branch_code),
    member_type TEXT NOT NULL,      -- adult, child, student, senior
    joined_on TEXT NOT NULL
);
CREATE TABLE loans (
    loan_id INTEGER PRIMARY KEY,
    book_id INTEGER NOT NULL REFERENCES books(book_id),
    member_no INTEGER NOT NULL REFERENCES members(member_no),
    loan_date TEXT NOT NULL,
    due_date TEXT NOT NULL,
    returned_date TEXT              -- NULL = not returned yet
);
CREATE TABLE fines (
    fine_id INTEGER PRIMARY KEY,
    loan_id INTEGER NOT NULL REFERENCES loans(loan_id),
    amount REAL NOT NULL,
    issued_on TEXT NOT NULL,
    paid_on TEXT                    -- NULL = unpaid
);
INSERT INTO branches (branch_code, branch_name, street_addr, opened_yr) VALUES
    ('CEN', 'Central Library', 'Market Square 1', 1962),
    ('NOR', 'Northside', 'Hazel Road 48', 1988),
    ('RIV', 'Riverside', 'Quay Street 7', 2004),
    ('HIL', 'Hillcrest', 'Orchard Lane 15', 2019),
    ('EAS', 'Eastgate', 'Eastgate Parade 3', 1975),
    ('WES', 'Westfield', 'Linden Avenue 102', 1996),
    ('STA', 'Station Square', 'Station Square 9', 2011),
    ('MOB', 'Mobile Library', 'depot: Mill Lane 2', 2015);
INSERT INTO authors (author_id, author_name, birth_yr, country) VALUES
    (1, 'Maren Holt', 1958, 'Norway'),
    (2, 'Theo Achterberg', 1971, 'Netherlands'),
    (3, 'Priya Raman', 1983, 'India'),
    (4, 'Colm Brennan', 1949, 'Ireland'),
    (5, 'Elodie Marchand', 1966, 'France'),
    (6, 'Samuel Adeyemi', 1977, 'Nigeria'),
    (7, 'Greta Vogt', 1990, 'Germany'),
    (8, 'Harriet Quinn', 1935, 'United Kingdom'),
    (9, 'Lucas Ferreira', 1980, 'Brazil'),
    (10, 'Anna Kowal', 1988, 'Poland'),
    (11, 'Jun Nakamura', 1969, 'Japan'),
    (12, 'Ines Duarte', NULL, 'Portugal');
INSERT INTO books (book_id, isbn, title, author_id, genre, pub_yr, pages, branch_code, copies, repl_cost) VALUES
    (1, '978-0-11-402217-3', 'The Salt Orchard', 1, 'fiction', 1994, 312, 'CEN', 3, 18.90),
    (2, '978-0-11-402518-1', 'Winter at Vardo', 1, 'fiction', 2001, 280, 'NOR', 2, 17.50),
    (3, '978-0-11-409921-2', 'Northern Lights Cookbook', 1, 'cooking', 2015, 198, 'STA', 1, 29.95),
    (4, '978-90-5531-104-8', 'Dykes and Dreams', 2, 'history', 2008, 455, 'CEN', 2, 34.00),
    (5, '978-90-5531-377-6', 'The Polder Detective', 2, 'crime', 2012, 336, 'RIV', 4, 16.99),
    (6, '978-90-5531-512-1', 'Murder on the Ferry', 2, 'crime', 2016, 298, 'RIV', 3, 16.99),
    (7, '978-81-7223-045-9', 'Monsoon Letters', 3, 'fiction', 2019, 264, 'HIL', 2, 19.50),
    (8, '978-81-7223-310-8', 'Algorithms for Gardeners', 3, 'science', 2021, 188, 'CEN', 1, 24.00),
    (9, '978-1-85186-022-4', 'The Long Tinker Road', 4, 'fiction', 1979, 402, 'EAS', 1, 15.00),
    (10, '978-1-85186-140-5', 'Galway Tides', 4, 'poetry', 1985, 96, 'WES', 1, 12.50),
    (11, '978-2-07-041187-2', 'A Kitchen in Lyon', 5, 'cooking', 2010, 240, 'RIV', 2, 27.80),
    (12, '978-2-07-039950-7', 'The Blue Shadows', 5, 'fiction', 2004, 350, 'CEN', 2, 18.00),
    (13, '978-978-49-112-0', 'Lagos by Night', 6, 'crime', 2014, 322, 'CEN', 3, 17.25),
    (14, '978-978-49-287-5', 'The River Oracle', 6, 'fantasy', 2018, 512, 'HIL', 2, 24.50),
    (15, '978-3-446-26610-3', 'Small Engines', 7, 'science', 2022, 174, 'EAS', 1, 21.00),
    (16, '978-3-446-27730-7', 'Ice Maps', 7, 'fiction', 2023, 226, 'HIL', 2, 19.99),
    (17, '978-0-00-611402-1', 'Tea with the Vicar', 8, 'crime', 1968, 208, 'CEN', 1, 9.99),
    (18, '978-0-00-611977-4', 'The Quiet Parish', 8, 'crime', 1972, 244, 'RIV', 1, 9.99),
    (19, '978-85-359-2011-6', 'Dragons of the Backlands', 9, 'fantasy', 2011, 688, 'CEN', 2, 26.00),
    (20, '978-85-359-2740-5', 'Football and Faith', 9, 'history', 2016, 290, 'WES', 1, 22.40),
    (21, '978-83-240-5561-9', 'The Amber Key', 10, 'children', 2017, 132, 'HIL', 4, 11.50),
    (22, '978-83-240-6123-8', 'Pip and the Paper Boat', 10, 'children', 2020, 48, 'CEN', 5, 8.95),
    (23, '978-4-10-118202-5', 'Tokyo Rain', 11, 'crime', 1999, 301, 'NOR', 2, 15.75),
    (24, '978-4-10-118391-6', 'Ten Thousand Cranes', 11, 'fiction', 2006, 377, 'CEN', 1, 18.40),
    (25, '978-972-20-4410-1', 'Cork and Cod', 12, 'cooking', 2013, 212, 'STA', 1, 25.00),
    (26, '978-972-20-4987-8', 'The Harbour Clock', 12, 'children', 2019, 64, 'HIL', 3, 10.50),
    (27, '978-0-9912-3304-1', 'Star Charts for Beginners', NULL, 'science', 2009, 156, 'MOB', 1, 14.00),
    (28, '978-0-9912-3571-7', 'Local Walks Around Town', NULL, 'travel', 2020, 120, 'MOB', 2, 7.50);
INSERT INTO members (member_no, first_nm, last_nm, dob, email, home_branch, member_type, joined_on) VALUES
    (1001, 'Olivia', 'Grant', '1985-02-11', 'ogrant@post.example', 'CEN', 'adult', '2015-06-01'),
    (1002, 'Ben', 'Carter', '2014-09-03', NULL, 'CEN', 'child', '2021-03-15'),
    (1003, 'Farah', 'Siddiqui', '1992-12-30', 'farah.s@post.example', 'RIV', 'adult', '2019-09-10'),
    (1004, 'Walter', 'Brooks', '1951-05-19', NULL, 'NOR', 'senior', '2008-01-22'),
    (1005, 'Emma', 'Novak', '2003-07-07', 'emma.novak@uni.example', 'HIL', 'student', '2022-09-01'),
    (1006, 'Rafael', 'Costa', '1978-03-25', 'rcosta@post.example', 'CEN', 'adult', '2012-11-05'),
    (1007, 'Mia', 'Hoffmann', '2016-01-14', NULL, 'RIV', 'child', '2023-05-20'),
    (1008, 'Nadia', 'Petrova', '1964-10-08', 'nadia.p@post.example', 'EAS', 'adult', '2010-04-17'),
    (1009, 'George', 'Ellis', '1948-08-30', 'g.ellis@post.example', 'CEN', 'senior', '2001-02-12'),
    (1010, 'Chen', 'Wei', '2001-04-22', 'chen.wei@uni.example', 'CEN', 'student', '2023-01-09'),
    (1011, 'Isla', 'MacLeod', '1990-06-16', 'isla.m@post.example', 'HIL', 'adult', '2020-02-28'),
    (1012, 'Tom', 'Fischer', '2012-11-27', NULL, 'WES', 'child', '2020-10-03'),
    (1013, 'Amara', 'Obi', '1987-01-05', 'amara.obi@post.example', 'RIV', 'adult', '2018-07-14'),
    (1014, 'Lars', 'Eriksen', '1955-09-12', NULL, 'RIV', 'senior', '2015-03-30'),
    (1015, 'Zoe', 'Adams', '1999-03-03', 'zoe.adams@post.example', 'STA', 'adult', '2024-11-18'),
    (1016, 'Hugo', 'Lambert', '1972-12-12', 'hugo.l@post.example', 'HIL', 'adult', '2025-01-07'),
    (1017, 'Petra', 'Dvorak', '1995-08-21', NULL, 'CEN', 'adult', '2025-05-28');
INSERT INTO loans (loan_id, book_id, member_no, loan_date, due_date, returned_date) VALUES
    (1, 5, 1001, '2025-01-04', '2025-01-25', '2025-01-22'),
    (2, 13, 1006, '2025-01-06', '2025-01-27', '2025-01-27'),
    (3, 22, 1002, '2025-01-09', '2025-01-30', '2025-02-08'),
    (4, 1, 1009, '2025-01-11', '2025-02-01', '2025-01-25'),
    (5, 19, 1010, '2025-01-15', '2025-02-05', '2025-02-19'),
    (6, 23, 1008, '2025-01-18', '2025-02-08', '2025-02-07'),
    (7, 14, 1005, '2025-01-22', '2025-02-12', '2025-02-12'),
    (8, 6, 1013, '2025-01-27', '2025-02-17', '2025-02-22'),
    (9, 4, 1004, '2025-02-01', '2025-02-22', '2025-02-20'),
    (10, 21, 1007, '2025-02-03', '2025-02-24', '2025-02-15'),
    (11, 5, 1003, '2025-02-05', '2025-02-26', '2025-02-26'),
    (12, 16, 1011, '2025-02-10', '2025-03-03', '2025-03-22'),
    (13, 12, 1001, '2025-02-14', '2025-03-07', '2025-03-03'),
    (14, 13, 1015, '2025-02-18', '2025-03-11', '2025-03-13'),
    (15, 26, 1012, '2025-02-20', '2025-03-13', '2025-03-17'),
    (16, 9, 1009, '2025-02-24', '2025-03-17', '2025-03-24'),
    (17, 19, 1006, '2025-03-01', '2025-03-22', '2025-03-22'),
    (18, 7, 1016, '2025-03-03', '2025-03-24', '2025-03-18'),
    (19, 5, 1010, '2025-03-05', '2025-03-26', '2025-03-27'),
    (20, 11, 1003, '2025-03-08', '2025-03-29', '2025-03-18'),
    (21, 17, 1014, '2025-03-12', '2025-04-02', '2025-05-16'),
    (22, 24, 1008, '2025-03-15', '2025-04-05', '2025-04-05'),
    (23, 2, 1004, '2025-03-18', '2025-04-08', '2025-04-17'),
    (24, 6, 1001, '2025-03-22', '2025-04-12', '2025-04-11'),
    (25, 16, 1005, '2025-03-26', '2025-04-16', '2025-04-13'),
    (26, 22, 1007, '2025-03-29', '2025-04-19', '2025-04-12'),
    (27, 13, 1003, '2025-04-02', '2025-04-23', '2025-04-23'),
    (28, 19, 1015, '2025-04-07', '2025-04-28', NULL),
    (29, 5, 1006, '2025-04-10', '2025-05-01', '2025-04-26'),
    (30, 14, 1011, '2025-04-14', '2025-05-05', '2025-05-05'),
    (31, 8, 1010, '2025-04-19', '2025-05-10', '2025-05-16'),
    (32, 23, 1013, '2025-04-24', '2025-05-15', NULL),
    (33, 1, 1001, '2025-05-02', '2025-05-23', '2025-05-21'),
    (34, 16, 1016, '2025-05-06', '2025-05-27', NULL),
    (35, 10, 1009, '2025-05-09', '2025-05-30', '2025-05-21'),
    (36, 21, 1002, '2025-05-13', '2025-06-03', NULL),
    (37, 12, 1012, '2025-05-17', '2025-06-07', '2025-06-07'),
    (38, 26, 1007, '2025-05-20', '2025-06-10', NULL);
INSERT INTO fines (fine_id, loan_id, amount, issued_on, paid_on) VALUES
    (1, 5, 3.50, '2025-02-19', '2025-02-19'),
    (2, 8, 1.25, '2025-02-22', '2025-02-22'),
    (3, 12, 4.75, '2025-03-22', NULL),
    (4, 14, 0.50, '2025-03-13', '2025-03-20'),
    (5, 16, 1.75, '2025-03-24', NULL),
    (6, 19, 0.25, '2025-03-27', '2025-03-27'),
    (7, 21, 10.00, '2025-05-16', NULL),
    (8, 23, 2.25, '2025-04-17', '2025-04-17'),
    (9, 31, 1.50, '2025-05-16', NULL);
