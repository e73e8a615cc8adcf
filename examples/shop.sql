-- The demo shop database of the README (examples/shop.sqlite is built from this file:
-- sqlite3 examples/shop.sqlite < examples/shop.sql).
CREATE TABLE products (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    category TEXT NOT NULL,
    price REAL NOT NULL,      -- in euros
    stock INTEGER NOT NULL    -- units in the warehouse
);
CREATE TABLE customers (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    city TEXT NOT NULL
);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    product_id INTEGER NOT NULL REFERENCES products(id),
    quantity INTEGER NOT NULL,
    ordered_on TEXT NOT NULL  -- YYYY-MM-DD
);
INSERT INTO products (id, name, category, price, stock) VALUES
    (1, 'Helmet Pro', 'helmets', 89.90, 42),
    (2, 'Helmet Lite', 'helmets', 49.50, 17),
    (3, 'Trail Gloves', 'clothing', 24.00, 120),
    (4, 'Rain Jacket', 'clothing', 119.00, 8),
    (5, 'Bike Lock XL', 'accessories', 35.75, 64),
    (6, 'LED Light Set', 'accessories', 29.99, 0),
    (7, 'Repair Kit', 'tools', 18.25, 33),
    (8, 'Floor Pump', 'tools', 39.00, 12);
INSERT INTO customers (id, name, city) VALUES
    (1, 'Ana Silva', 'Lisbon'),
    (2, 'Jonas Weber', 'Berlin'),
    (3, 'Chloe Martin', 'Lyon'),
    (4, 'Marek Novak', 'Prague');
INSERT INTO orders (id, customer_id, product_id, quantity, ordered_on) VALUES
    (1, 1, 1, 2, '2026-09-03'),
    (2, 2, 3, 4, '2026-09-05'),
    (3, 3, 4, 1, '2026-09-12'),
    (4, 1, 5, 1, '2026-10-01'),
    (5, 4, 1, 1, '2026-10-07'),
    (6, 2, 8, 1, '2026-10-19'),
    (7, 3, 2, 3, '2026-11-02'),
    (8, 4, 7, 2, '2026-11-15');
