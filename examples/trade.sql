-- The trading company database of the trade suite (examples/trade.sqlite is built from this
-- file: sqlite3 examples/trade.sqlite < examples/trade.sql). Its names are written the way
-- exports from spreadsheets and other engines write them: words with spaces ("Unit Price"),
-- and a table named with an SQL keyword ("Order"), so a query must quote them.
-- Dates are TEXT 'YYYY-MM-DD'; money is in euros; "Shipped Date" is NULL for an order not
-- shipped yet; Discount is a fraction (0.05 = 5%).
CREATE TABLE "Suppliers" (
    "Supplier ID" INTEGER PRIMARY KEY,
    "Company Name" TEXT NOT NULL,
    "Contact Name" TEXT NOT NULL,
    Country TEXT NOT NULL
);
CREATE TABLE "Products" (
    "Product ID" INTEGER PRIMARY KEY,
    "Product Name" TEXT NOT NULL,
    "Supplier ID" INTEGER NOT NULL REFERENCES "Suppliers"("Supplier ID"),
    Category TEXT NOT NULL,
    "Unit Price" REAL NOT NULL,
    "Units In Stock" INTEGER NOT NULL,
    Discontinued INTEGER NOT NULL DEFAULT 0   -- 1 = no longer sold
);
CREATE TABLE "Customers" (
    "Customer ID" TEXT PRIMARY KEY,           -- five capital letters
    "Company Name" TEXT NOT NULL,
    City TEXT NOT NULL,
    Country TEXT NOT NULL
);
CREATE TABLE "Employees" (
    "Employee ID" INTEGER PRIMARY KEY,
    "First Name" TEXT NOT NULL,
    "Last Name" TEXT NOT NULL,
    Title TEXT NOT NULL,
    "Hire Date" TEXT NOT NULL
);
CREATE TABLE "Order" (
    "Order ID" INTEGER PRIMARY KEY,
    "Customer ID" TEXT NOT NULL REFERENCES "Customers"("Customer ID"),
    "Employee ID" INTEGER NOT NULL REFERENCES "Employees"("Employee ID"),
    "Order Date" TEXT NOT NULL,
    "Shipped Date" TEXT,                      -- NULL: not shipped yet
    "Ship Via" TEXT NOT NULL,                 -- the carrier
    Freight REAL NOT NULL
);
CREATE TABLE "Order Details" (
    "Order ID" INTEGER NOT NULL REFERENCES "Order"("Order ID"),
    "Product ID" INTEGER NOT NULL REFERENCES "Products"("Product ID"),
    "Unit Price" REAL NOT NULL,               -- the price on that order
    Quantity INTEGER NOT NULL,
    Discount REAL NOT NULL DEFAULT 0
);
INSERT INTO "Suppliers" VALUES (1, 'Exotic Liquids', 'Charlotte Cooper', 'United Kingdom');
INSERT INTO "Suppliers" VALUES (2, 'New Orleans Cajun Delights', 'Shelley Burke', 'USA');
INSERT INTO "Suppliers" VALUES (3, 'Tokyo Traders', 'Yoshi Nagase', 'Japan');
INSERT INTO "Suppliers" VALUES (4, 'Cooperativa de Quesos', 'Antonio del Valle', 'Spain');
INSERT INTO "Suppliers" VALUES (5, 'Pavlova Ltd', 'Ian Devling', 'Australia');
INSERT INTO "Suppliers" VALUES (6, 'Nord-Ost-Fisch', 'Sven Petersen', 'Germany');
INSERT INTO "Products" VALUES (1, 'Chai', 1, 'Beverages', 18.0, 39, 0);
INSERT INTO "Products" VALUES (2, 'Chang', 1, 'Beverages', 19.0, 17, 0);
INSERT INTO "Products" VALUES (3, 'Aniseed Syrup', 1, 'Condiments', 10.0, 13, 0);
INSERT INTO "Products" VALUES (4, 'Cajun Seasoning', 2, 'Condiments', 22.0, 53, 0);
INSERT INTO "Products" VALUES (5, 'Gumbo Mix', 2, 'Condiments', 21.35, 0, 1);
INSERT INTO "Products" VALUES (6, 'Boysenberry Spread', 2, 'Condiments', 25.0, 120, 0);
INSERT INTO "Products" VALUES (7, 'Dried Pears', 3, 'Produce', 30.0, 15, 0);
INSERT INTO "Products" VALUES (8, 'Ikura', 3, 'Seafood', 31.0, 31, 0);
INSERT INTO "Products" VALUES (9, 'Kobe Niku', 3, 'Meat', 97.0, 29, 1);
INSERT INTO "Products" VALUES (10, 'Queso Cabrales', 4, 'Dairy', 21.0, 22, 0);
INSERT INTO "Products" VALUES (11, 'Queso Manchego', 4, 'Dairy', 38.0, 86, 0);
INSERT INTO "Products" VALUES (12, 'Pavlova', 5, 'Confections', 17.45, 29, 0);
INSERT INTO "Products" VALUES (13, 'Carnarvon Tigers', 5, 'Seafood', 62.5, 42, 0);
INSERT INTO "Products" VALUES (14, 'Vegemite', 5, 'Condiments', 43.9, 24, 0);
INSERT INTO "Products" VALUES (15, 'Nord-Ost Matjeshering', 6, 'Seafood', 25.89, 10, 0);
INSERT INTO "Products" VALUES (16, 'Rhoenbraeu Klosterbier', 6, 'Beverages', 7.75, 125, 0);
INSERT INTO "Customers" VALUES ('ALFKI', 'Alfreds Futterkiste', 'Berlin', 'Germany');
INSERT INTO "Customers" VALUES ('BONAP', 'Bon app', 'Marseille', 'France');
INSERT INTO "Customers" VALUES ('ERNSH', 'Ernst Handel', 'Graz', 'Austria');
INSERT INTO "Customers" VALUES ('FOLKO', 'Folk och fae HB', 'Bracke', 'Sweden');
INSERT INTO "Customers" VALUES ('HANAR', 'Hanari Carnes', 'Rio de Janeiro', 'Brazil');
INSERT INTO "Customers" VALUES ('QUICK', 'QUICK-Stop', 'Cunewalde', 'Germany');
INSERT INTO "Customers" VALUES ('RATTC', 'Rattlesnake Canyon Grocery', 'Albuquerque', 'USA');
INSERT INTO "Customers" VALUES ('SAVEA', 'Save-a-lot Markets', 'Boise', 'USA');
INSERT INTO "Customers" VALUES ('WANDK', 'Die Wandernde Kuh', 'Stuttgart', 'Germany');
INSERT INTO "Customers" VALUES ('LILAS', 'LILA-Supermercado', 'Barquisimeto', 'Venezuela');
INSERT INTO "Employees" VALUES (1, 'Nancy', 'Davolio', 'Sales Representative', '2021-05-01');
INSERT INTO "Employees" VALUES (2, 'Andrew', 'Fuller', 'Vice President, Sales', '2019-08-14');
INSERT INTO "Employees" VALUES (3, 'Janet', 'Leverling', 'Sales Representative', '2022-04-01');
INSERT INTO "Employees" VALUES (4, 'Margaret', 'Peacock', 'Sales Representative', '2023-05-03');
INSERT INTO "Employees" VALUES (5, 'Steven', 'Buchanan', 'Sales Manager', '2020-10-17');
INSERT INTO "Order" VALUES (10248, 'BONAP', 3, '2025-09-17', '2025-09-19', 'Speedy Express', 134.54);
INSERT INTO "Order" VALUES (10249, 'ALFKI', 1, '2025-02-10', '2025-02-18', 'Speedy Express', 122.77);
INSERT INTO "Order" VALUES (10250, 'WANDK', 1, '2025-12-11', NULL, 'Federal Shipping', 45.94);
INSERT INTO "Order" VALUES (10251, 'QUICK', 3, '2025-08-14', NULL, 'Federal Shipping', 84.5);
INSERT INTO "Order" VALUES (10252, 'SAVEA', 4, '2025-09-09', '2025-09-17', 'Federal Shipping', 79.14);
INSERT INTO "Order" VALUES (10253, 'WANDK', 1, '2025-12-20', '2025-12-23', 'United Package', 132.99);
INSERT INTO "Order" VALUES (10254, 'WANDK', 3, '2025-09-13', '2025-09-18', 'Federal Shipping', 120.57);
INSERT INTO "Order" VALUES (10255, 'ERNSH', 4, '2025-09-16', '2025-09-20', 'United Package', 104.82);
INSERT INTO "Order" VALUES (10256, 'QUICK', 4, '2025-02-15', '2025-02-24', 'United Package', 69.58);
INSERT INTO "Order" VALUES (10257, 'HANAR', 4, '2025-06-04', '2025-06-11', 'Speedy Express', 69.06);
INSERT INTO "Order" VALUES (10258, 'LILAS', 5, '2025-02-20', '2025-02-24', 'Speedy Express', 94.3);
INSERT INTO "Order" VALUES (10259, 'SAVEA', 2, '2025-09-08', '2025-09-11', 'Federal Shipping', 131.77);
INSERT INTO "Order" VALUES (10260, 'RATTC', 2, '2025-09-26', '2025-09-27', 'Speedy Express', 60.23);
INSERT INTO "Order" VALUES (10261, 'QUICK', 1, '2025-01-17', '2025-01-22', 'United Package', 50.93);
INSERT INTO "Order" VALUES (10262, 'LILAS', 2, '2025-03-19', '2025-03-26', 'Federal Shipping', 52.45);
INSERT INTO "Order" VALUES (10263, 'ERNSH', 1, '2025-11-18', '2025-11-19', 'United Package', 130.61);
INSERT INTO "Order" VALUES (10264, 'ERNSH', 2, '2025-07-09', '2025-07-16', 'Speedy Express', 59.33);
INSERT INTO "Order" VALUES (10265, 'SAVEA', 4, '2025-07-10', '2025-07-16', 'Federal Shipping', 73.86);
INSERT INTO "Order" VALUES (10266, 'FOLKO', 1, '2025-02-15', '2025-02-22', 'Federal Shipping', 118.15);
INSERT INTO "Order" VALUES (10267, 'FOLKO', 1, '2025-10-23', '2025-10-27', 'Federal Shipping', 46.32);
INSERT INTO "Order" VALUES (10268, 'BONAP', 1, '2025-06-24', '2025-06-26', 'Federal Shipping', 49.09);
INSERT INTO "Order" VALUES (10269, 'HANAR', 4, '2025-01-02', NULL, 'Speedy Express', 48.56);
INSERT INTO "Order" VALUES (10270, 'LILAS', 1, '2025-07-11', '2025-07-19', 'United Package', 146.93);
INSERT INTO "Order" VALUES (10271, 'HANAR', 4, '2025-05-27', '2025-06-06', 'Speedy Express', 44.37);
INSERT INTO "Order" VALUES (10272, 'LILAS', 1, '2025-09-11', '2025-09-12', 'Federal Shipping', 149.58);
INSERT INTO "Order" VALUES (10273, 'ERNSH', 5, '2025-06-20', '2025-06-25', 'Speedy Express', 65.44);
INSERT INTO "Order" VALUES (10274, 'RATTC', 3, '2025-07-22', '2025-07-25', 'Speedy Express', 82.81);
INSERT INTO "Order" VALUES (10275, 'SAVEA', 4, '2025-05-11', NULL, 'Federal Shipping', 90.27);
INSERT INTO "Order" VALUES (10276, 'QUICK', 5, '2025-12-11', NULL, 'Speedy Express', 95.3);
INSERT INTO "Order" VALUES (10277, 'WANDK', 2, '2025-12-28', '2026-01-06', 'Speedy Express', 85.55);
INSERT INTO "Order" VALUES (10278, 'SAVEA', 5, '2025-08-26', '2025-09-03', 'Speedy Express', 26.27);
INSERT INTO "Order" VALUES (10279, 'RATTC', 1, '2025-11-06', NULL, 'United Package', 83.37);
INSERT INTO "Order" VALUES (10280, 'LILAS', 3, '2025-10-02', '2025-10-09', 'Federal Shipping', 144.58);
INSERT INTO "Order" VALUES (10281, 'HANAR', 1, '2025-12-19', '2025-12-23', 'Speedy Express', 135.14);
INSERT INTO "Order" VALUES (10282, 'ALFKI', 4, '2025-07-12', '2025-07-21', 'Speedy Express', 109.13);
INSERT INTO "Order" VALUES (10283, 'ERNSH', 2, '2025-01-04', '2025-01-05', 'United Package', 12.35);
INSERT INTO "Order" VALUES (10284, 'ERNSH', 1, '2025-06-16', NULL, 'Federal Shipping', 13.75);
INSERT INTO "Order" VALUES (10285, 'BONAP', 5, '2025-09-08', '2025-09-16', 'Federal Shipping', 53.73);
INSERT INTO "Order" VALUES (10286, 'HANAR', 3, '2025-03-11', '2025-03-20', 'United Package', 50.44);
INSERT INTO "Order" VALUES (10287, 'RATTC', 4, '2025-04-05', '2025-04-08', 'United Package', 42.34);
INSERT INTO "Order" VALUES (10288, 'HANAR', 2, '2025-09-21', '2025-09-27', 'Speedy Express', 85.51);
INSERT INTO "Order" VALUES (10289, 'SAVEA', 4, '2025-07-01', '2025-07-07', 'Federal Shipping', 63.22);
INSERT INTO "Order" VALUES (10290, 'FOLKO', 4, '2025-06-21', '2025-06-28', 'Federal Shipping', 28.43);
INSERT INTO "Order" VALUES (10291, 'SAVEA', 4, '2025-06-01', NULL, 'Speedy Express', 96.53);
INSERT INTO "Order" VALUES (10292, 'QUICK', 1, '2025-09-23', '2025-09-24', 'Speedy Express', 25.91);
INSERT INTO "Order" VALUES (10293, 'ERNSH', 3, '2025-02-19', '2025-02-28', 'Federal Shipping', 89.59);
INSERT INTO "Order" VALUES (10294, 'RATTC', 1, '2025-03-18', '2025-03-22', 'United Package', 99.71);
INSERT INTO "Order" VALUES (10295, 'SAVEA', 3, '2025-05-02', '2025-05-05', 'Speedy Express', 73.66);
INSERT INTO "Order" VALUES (10296, 'WANDK', 4, '2025-05-07', '2025-05-14', 'Speedy Express', 109.71);
INSERT INTO "Order" VALUES (10297, 'QUICK', 3, '2025-06-06', NULL, 'Federal Shipping', 129.93);
INSERT INTO "Order" VALUES (10298, 'RATTC', 1, '2025-10-07', NULL, 'Speedy Express', 33.82);
INSERT INTO "Order" VALUES (10299, 'QUICK', 3, '2025-11-13', '2025-11-22', 'Speedy Express', 25.34);
INSERT INTO "Order" VALUES (10300, 'HANAR', 2, '2025-03-09', '2025-03-15', 'Speedy Express', 70.22);
INSERT INTO "Order" VALUES (10301, 'ERNSH', 4, '2025-11-20', '2025-12-01', 'Speedy Express', 47.2);
INSERT INTO "Order" VALUES (10302, 'WANDK', 1, '2025-08-01', NULL, 'United Package', 89.14);
INSERT INTO "Order" VALUES (10303, 'RATTC', 3, '2025-03-08', '2025-03-16', 'Speedy Express', 57.74);
INSERT INTO "Order" VALUES (10304, 'LILAS', 4, '2025-02-07', '2025-02-09', 'Speedy Express', 55.03);
INSERT INTO "Order" VALUES (10305, 'WANDK', 2, '2025-11-21', '2025-11-26', 'Federal Shipping', 56.69);
INSERT INTO "Order" VALUES (10306, 'HANAR', 3, '2025-08-05', NULL, 'Speedy Express', 85.27);
INSERT INTO "Order" VALUES (10307, 'WANDK', 3, '2025-05-22', NULL, 'United Package', 53.85);
INSERT INTO "Order Details" VALUES (10248, 14, 43.9, 36, 0.15);
INSERT INTO "Order Details" VALUES (10248, 13, 62.5, 32, 0.1);
INSERT INTO "Order Details" VALUES (10248, 10, 21.0, 29, 0);
INSERT INTO "Order Details" VALUES (10249, 16, 7.75, 14, 0.05);
INSERT INTO "Order Details" VALUES (10249, 11, 38.0, 17, 0);
INSERT INTO "Order Details" VALUES (10249, 6, 25.0, 23, 0.05);
INSERT INTO "Order Details" VALUES (10250, 5, 21.35, 37, 0);
INSERT INTO "Order Details" VALUES (10250, 15, 25.89, 2, 0.15);
INSERT INTO "Order Details" VALUES (10251, 14, 43.9, 33, 0.1);
INSERT INTO "Order Details" VALUES (10252, 8, 31.0, 9, 0);
INSERT INTO "Order Details" VALUES (10253, 15, 25.89, 31, 0.15);
INSERT INTO "Order Details" VALUES (10254, 16, 7.75, 28, 0);
INSERT INTO "Order Details" VALUES (10254, 13, 62.5, 19, 0);
INSERT INTO "Order Details" VALUES (10254, 7, 30.0, 1, 0);
INSERT INTO "Order Details" VALUES (10255, 16, 7.75, 28, 0.1);
INSERT INTO "Order Details" VALUES (10255, 13, 62.5, 3, 0);
INSERT INTO "Order Details" VALUES (10256, 14, 43.9, 31, 0);
INSERT INTO "Order Details" VALUES (10257, 3, 10.0, 1, 0.05);
INSERT INTO "Order Details" VALUES (10258, 9, 97.0, 23, 0);
INSERT INTO "Order Details" VALUES (10258, 11, 38.0, 1, 0);
INSERT INTO "Order Details" VALUES (10258, 13, 62.5, 38, 0.1);
INSERT INTO "Order Details" VALUES (10259, 10, 21.0, 11, 0);
INSERT INTO "Order Details" VALUES (10259, 2, 19.0, 38, 0);
INSERT INTO "Order Details" VALUES (10259, 7, 30.0, 33, 0.05);
INSERT INTO "Order Details" VALUES (10260, 2, 19.0, 23, 0.15);
INSERT INTO "Order Details" VALUES (10261, 16, 7.75, 30, 0.1);
INSERT INTO "Order Details" VALUES (10262, 8, 31.0, 5, 0.1);
INSERT INTO "Order Details" VALUES (10262, 11, 38.0, 26, 0);
INSERT INTO "Order Details" VALUES (10262, 12, 17.45, 13, 0.15);
INSERT INTO "Order Details" VALUES (10263, 7, 30.0, 2, 0);
INSERT INTO "Order Details" VALUES (10263, 8, 31.0, 34, 0);
INSERT INTO "Order Details" VALUES (10263, 12, 17.45, 34, 0);
INSERT INTO "Order Details" VALUES (10264, 12, 17.45, 12, 0);
INSERT INTO "Order Details" VALUES (10265, 9, 97.0, 7, 0);
INSERT INTO "Order Details" VALUES (10266, 6, 25.0, 11, 0);
INSERT INTO "Order Details" VALUES (10266, 1, 18.0, 36, 0.15);
INSERT INTO "Order Details" VALUES (10266, 16, 7.75, 37, 0.1);
INSERT INTO "Order Details" VALUES (10267, 5, 21.35, 17, 0);
INSERT INTO "Order Details" VALUES (10267, 2, 19.0, 28, 0);
INSERT INTO "Order Details" VALUES (10268, 3, 10.0, 11, 0);
INSERT INTO "Order Details" VALUES (10268, 5, 21.35, 17, 0);
INSERT INTO "Order Details" VALUES (10268, 6, 25.0, 1, 0.05);
INSERT INTO "Order Details" VALUES (10269, 12, 17.45, 21, 0.05);
INSERT INTO "Order Details" VALUES (10270, 12, 17.45, 33, 0.15);
INSERT INTO "Order Details" VALUES (10271, 10, 21.0, 8, 0);
INSERT INTO "Order Details" VALUES (10271, 12, 17.45, 27, 0);
INSERT INTO "Order Details" VALUES (10272, 4, 22.0, 8, 0);
INSERT INTO "Order Details" VALUES (10273, 12, 17.45, 27, 0.05);
INSERT INTO "Order Details" VALUES (10274, 13, 62.5, 10, 0);
INSERT INTO "Order Details" VALUES (10274, 15, 25.89, 2, 0);
INSERT INTO "Order Details" VALUES (10274, 5, 21.35, 18, 0.1);
INSERT INTO "Order Details" VALUES (10275, 2, 19.0, 33, 0);
INSERT INTO "Order Details" VALUES (10276, 16, 7.75, 4, 0);
INSERT INTO "Order Details" VALUES (10277, 11, 38.0, 13, 0);
INSERT INTO "Order Details" VALUES (10277, 14, 43.9, 23, 0.05);
INSERT INTO "Order Details" VALUES (10278, 5, 21.35, 1, 0);
INSERT INTO "Order Details" VALUES (10278, 8, 31.0, 34, 0.15);
INSERT INTO "Order Details" VALUES (10279, 5, 21.35, 7, 0);
INSERT INTO "Order Details" VALUES (10279, 12, 17.45, 35, 0);
INSERT INTO "Order Details" VALUES (10280, 6, 25.0, 6, 0);
INSERT INTO "Order Details" VALUES (10280, 9, 97.0, 25, 0);
INSERT INTO "Order Details" VALUES (10280, 2, 19.0, 36, 0);
INSERT INTO "Order Details" VALUES (10281, 10, 21.0, 9, 0.05);
INSERT INTO "Order Details" VALUES (10281, 6, 25.0, 13, 0.15);
INSERT INTO "Order Details" VALUES (10282, 6, 25.0, 21, 0.1);
INSERT INTO "Order Details" VALUES (10283, 7, 30.0, 10, 0.1);
INSERT INTO "Order Details" VALUES (10283, 9, 97.0, 40, 0);
INSERT INTO "Order Details" VALUES (10284, 10, 21.0, 8, 0);
INSERT INTO "Order Details" VALUES (10284, 11, 38.0, 31, 0.05);
INSERT INTO "Order Details" VALUES (10285, 3, 10.0, 32, 0);
INSERT INTO "Order Details" VALUES (10286, 16, 7.75, 12, 0);
INSERT INTO "Order Details" VALUES (10286, 7, 30.0, 30, 0);
INSERT INTO "Order Details" VALUES (10286, 6, 25.0, 23, 0);
INSERT INTO "Order Details" VALUES (10287, 11, 38.0, 18, 0.05);
INSERT INTO "Order Details" VALUES (10288, 9, 97.0, 19, 0.1);
INSERT INTO "Order Details" VALUES (10289, 16, 7.75, 35, 0.1);
INSERT INTO "Order Details" VALUES (10290, 9, 97.0, 22, 0.1);
INSERT INTO "Order Details" VALUES (10290, 3, 10.0, 40, 0.05);
INSERT INTO "Order Details" VALUES (10291, 9, 97.0, 14, 0.05);
INSERT INTO "Order Details" VALUES (10291, 6, 25.0, 33, 0);
INSERT INTO "Order Details" VALUES (10291, 1, 18.0, 40, 0.15);
INSERT INTO "Order Details" VALUES (10292, 15, 25.89, 14, 0.1);
INSERT INTO "Order Details" VALUES (10293, 4, 22.0, 2, 0);
INSERT INTO "Order Details" VALUES (10294, 11, 38.0, 21, 0.1);
INSERT INTO "Order Details" VALUES (10294, 6, 25.0, 31, 0);
INSERT INTO "Order Details" VALUES (10295, 9, 97.0, 30, 0);
INSERT INTO "Order Details" VALUES (10295, 14, 43.9, 24, 0);
INSERT INTO "Order Details" VALUES (10296, 10, 21.0, 6, 0.1);
INSERT INTO "Order Details" VALUES (10296, 8, 31.0, 34, 0.1);
INSERT INTO "Order Details" VALUES (10296, 16, 7.75, 21, 0.05);
INSERT INTO "Order Details" VALUES (10297, 9, 97.0, 34, 0.1);
INSERT INTO "Order Details" VALUES (10298, 5, 21.35, 18, 0.15);
INSERT INTO "Order Details" VALUES (10298, 9, 97.0, 32, 0);
INSERT INTO "Order Details" VALUES (10298, 4, 22.0, 36, 0.15);
INSERT INTO "Order Details" VALUES (10299, 5, 21.35, 9, 0.15);
INSERT INTO "Order Details" VALUES (10299, 12, 17.45, 37, 0);
INSERT INTO "Order Details" VALUES (10299, 3, 10.0, 3, 0);
INSERT INTO "Order Details" VALUES (10300, 2, 19.0, 12, 0.15);
INSERT INTO "Order Details" VALUES (10301, 12, 17.45, 6, 0.05);
INSERT INTO "Order Details" VALUES (10301, 15, 25.89, 27, 0);
INSERT INTO "Order Details" VALUES (10301, 9, 97.0, 21, 0);
INSERT INTO "Order Details" VALUES (10302, 9, 97.0, 2, 0);
INSERT INTO "Order Details" VALUES (10302, 6, 25.0, 33, 0);
INSERT INTO "Order Details" VALUES (10302, 13, 62.5, 6, 0.05);
INSERT INTO "Order Details" VALUES (10303, 14, 43.9, 30, 0);
INSERT INTO "Order Details" VALUES (10303, 12, 17.45, 14, 0);
INSERT INTO "Order Details" VALUES (10303, 7, 30.0, 29, 0.1);
INSERT INTO "Order Details" VALUES (10304, 6, 25.0, 14, 0.15);
INSERT INTO "Order Details" VALUES (10304, 2, 19.0, 28, 0);
INSERT INTO "Order Details" VALUES (10304, 3, 10.0, 28, 0);
INSERT INTO "Order Details" VALUES (10305, 16, 7.75, 34, 0.05);
INSERT INTO "Order Details" VALUES (10306, 15, 25.89, 39, 0.15);
INSERT INTO "Order Details" VALUES (10306, 7, 30.0, 38, 0);
INSERT INTO "Order Details" VALUES (10307, 4, 22.0, 19, 0);
INSERT INTO "Order Details" VALUES (10307, 14, 43.9, 6, 0.1);
INSERT INTO "Order Details" VALUES (10307, 5, 21.35, 3, 0);
