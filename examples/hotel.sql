-- The seaside hotel database of the hotel suite (examples/hotel.sqlite is built from this
-- file: sqlite3 examples/hotel.sqlite < examples/hotel.sql). Names are in PascalCase; dates
-- are TEXT 'YYYY-MM-DD'; money is in euros; NULL means unknown.
CREATE TABLE Guest (
    GuestId INTEGER PRIMARY KEY,
    Name TEXT NOT NULL,
    Country TEXT NOT NULL,
    Email TEXT,                     -- NULL when the guest gave none
    IsMember INTEGER NOT NULL       -- 1 = member of the loyalty programme
);
CREATE TABLE Room (
    RoomNo INTEGER PRIMARY KEY,
    Kind TEXT NOT NULL,             -- single, double, family, suite
    Floor INTEGER NOT NULL,
    Rate REAL NOT NULL,             -- price per night, breakfast not included
    SeaView INTEGER NOT NULL,       -- 1 = the room faces the sea
    Beds INTEGER NOT NULL
);
CREATE TABLE Booking (
    BookingId INTEGER PRIMARY KEY,
    GuestId INTEGER NOT NULL REFERENCES Guest(GuestId),
    RoomNo INTEGER NOT NULL REFERENCES Room(RoomNo),
    Arrival TEXT NOT NULL,
    Departure TEXT NOT NULL,        -- the morning the guest leaves: nights = Departure - Arrival
    Adults INTEGER NOT NULL,
    Children INTEGER NOT NULL,
    State TEXT NOT NULL             -- booked, completed, cancelled
);
CREATE TABLE Charge (
    ChargeId INTEGER PRIMARY KEY,
    BookingId INTEGER NOT NULL REFERENCES Booking(BookingId),
    Item TEXT NOT NULL,             -- breakfast, parking, spa, restaurant, minibar, ...
    Amount REAL NOT NULL,
    ChargedOn TEXT NOT NULL
);
INSERT INTO Guest VALUES (1, 'Anna Berg', 'Sweden', 'anna.berg@post.example', 1);
INSERT INTO Guest VALUES (2, 'Tomás Ruiz', 'Spain', NULL, 0);
INSERT INTO Guest VALUES (3, 'Greta Novak', 'Czechia', 'greta.n@mail.example', 0);
INSERT INTO Guest VALUES (4, 'Liam O''Brien', 'Ireland', 'liam.ob@mail.example', 1);
INSERT INTO Guest VALUES (5, 'Mei Chen', 'Singapore', 'mei.chen@post.example', 0);
INSERT INTO Guest VALUES (6, 'Jonas Meyer', 'Germany', 'jonas.m@mail.example', 0);
INSERT INTO Guest VALUES (7, 'Sara Conti', 'Italy', NULL, 1);
INSERT INTO Guest VALUES (8, 'Pieter de Wit', 'Netherlands', 'pieter.dw@post.example', 0);
INSERT INTO Guest VALUES (9, 'Olga Ivanova', 'Estonia', 'olga.i@mail.example', 0);
INSERT INTO Guest VALUES (10, 'Kofi Mensah', 'Ghana', 'kofi.m@post.example', 0);
INSERT INTO Guest VALUES (11, 'Emma Laurent', 'France', 'emma.l@mail.example', 1);
INSERT INTO Guest VALUES (12, 'Hannah Weiss', 'Germany', NULL, 0);
INSERT INTO Room VALUES (101, 'single', 1, 79, 0, 1);
INSERT INTO Room VALUES (102, 'single', 1, 79, 0, 1);
INSERT INTO Room VALUES (103, 'double', 1, 109, 0, 2);
INSERT INTO Room VALUES (201, 'double', 2, 119, 1, 2);
INSERT INTO Room VALUES (202, 'double', 2, 109, 0, 2);
INSERT INTO Room VALUES (203, 'family', 2, 159, 0, 4);
INSERT INTO Room VALUES (301, 'double', 3, 129, 1, 2);
INSERT INTO Room VALUES (302, 'suite', 3, 219, 1, 2);
INSERT INTO Room VALUES (303, 'family', 3, 169, 1, 4);
INSERT INTO Room VALUES (401, 'suite', 4, 249, 1, 3);
INSERT INTO Booking VALUES (1, 1, 201, '2025-03-02', '2025-03-05', 2, 0, 'completed');
INSERT INTO Booking VALUES (2, 2, 101, '2025-03-04', '2025-03-06', 1, 0, 'completed');
INSERT INTO Booking VALUES (3, 3, 203, '2025-03-10', '2025-03-17', 2, 2, 'completed');
INSERT INTO Booking VALUES (4, 4, 302, '2025-03-14', '2025-03-16', 2, 0, 'completed');
INSERT INTO Booking VALUES (5, 5, 102, '2025-03-20', '2025-03-21', 1, 0, 'cancelled');
INSERT INTO Booking VALUES (6, 6, 103, '2025-03-22', '2025-03-26', 2, 0, 'completed');
INSERT INTO Booking VALUES (7, 1, 301, '2025-04-01', '2025-04-04', 2, 0, 'completed');
INSERT INTO Booking VALUES (8, 7, 401, '2025-04-05', '2025-04-10', 2, 1, 'completed');
INSERT INTO Booking VALUES (9, 8, 202, '2025-04-08', '2025-04-09', 1, 0, 'completed');
INSERT INTO Booking VALUES (10, 9, 303, '2025-04-12', '2025-04-19', 2, 2, 'completed');
INSERT INTO Booking VALUES (11, 10, 101, '2025-04-15', '2025-04-18', 1, 0, 'cancelled');
INSERT INTO Booking VALUES (12, 11, 302, '2025-04-18', '2025-04-21', 2, 0, 'completed');
INSERT INTO Booking VALUES (13, 3, 201, '2025-05-01', '2025-05-03', 2, 0, 'completed');
INSERT INTO Booking VALUES (14, 12, 203, '2025-05-03', '2025-05-10', 2, 3, 'completed');
INSERT INTO Booking VALUES (15, 6, 102, '2025-05-09', '2025-05-11', 1, 0, 'completed');
INSERT INTO Booking VALUES (16, 4, 401, '2025-05-20', '2025-05-25', 2, 0, 'completed');
INSERT INTO Booking VALUES (17, 2, 103, '2025-06-02', '2025-06-06', 2, 0, 'booked');
INSERT INTO Booking VALUES (18, 7, 301, '2025-06-05', '2025-06-08', 2, 0, 'booked');
INSERT INTO Booking VALUES (19, 5, 202, '2025-06-10', '2025-06-12', 1, 0, 'booked');
INSERT INTO Booking VALUES (20, 8, 303, '2025-06-14', '2025-06-21', 2, 1, 'booked');
INSERT INTO Booking VALUES (21, 11, 201, '2025-06-20', '2025-06-22', 2, 0, 'cancelled');
INSERT INTO Booking VALUES (22, 9, 102, '2025-06-25', '2025-06-28', 1, 0, 'booked');
INSERT INTO Charge VALUES (1, 1, 'breakfast', 36, '2025-03-03');
INSERT INTO Charge VALUES (2, 1, 'minibar', 12.5, '2025-03-04');
INSERT INTO Charge VALUES (3, 3, 'breakfast', 54, '2025-03-11');
INSERT INTO Charge VALUES (4, 3, 'parking', 105, '2025-03-17');
INSERT INTO Charge VALUES (5, 4, 'spa', 90, '2025-03-15');
INSERT INTO Charge VALUES (6, 4, 'restaurant', 148.4, '2025-03-15');
INSERT INTO Charge VALUES (7, 5, 'cancellation fee', 79, '2025-03-19');
INSERT INTO Charge VALUES (8, 6, 'parking', 60, '2025-03-26');
INSERT INTO Charge VALUES (9, 7, 'breakfast', 36, '2025-04-02');
INSERT INTO Charge VALUES (10, 7, 'late check-out', 30, '2025-04-04');
INSERT INTO Charge VALUES (11, 8, 'restaurant', 212.8, '2025-04-07');
INSERT INTO Charge VALUES (12, 8, 'spa', 180, '2025-04-08');
INSERT INTO Charge VALUES (13, 8, 'minibar', 23, '2025-04-09');
INSERT INTO Charge VALUES (14, 10, 'parking', 105, '2025-04-19');
INSERT INTO Charge VALUES (15, 10, 'breakfast', 63, '2025-04-13');
INSERT INTO Charge VALUES (16, 12, 'spa', 45, '2025-04-19');
INSERT INTO Charge VALUES (17, 13, 'minibar', 8.5, '2025-05-02');
INSERT INTO Charge VALUES (18, 14, 'breakfast', 72, '2025-05-04');
INSERT INTO Charge VALUES (19, 14, 'parking', 105, '2025-05-10');
INSERT INTO Charge VALUES (20, 16, 'restaurant', 96.6, '2025-05-22');
INSERT INTO Charge VALUES (21, 16, 'late check-out', 30, '2025-05-25');
