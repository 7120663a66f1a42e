-- The SQL ledger: the source of truth for jobs, items, orders, logistics and call counts.
-- Instants are INTEGER unix milliseconds (UTC) unless noted; api_calls.minute is TEXT
-- 'YYYY-MM-DD HH:MM' in UTC so it sorts and reads well in plain SQL.
-- Table names must not collide with apalis-sqlite's (`Jobs`, `Workers`; SQLite names are
-- case-insensitive), so the embedded queue lives in its own database file.

CREATE TABLE jobs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    kind        TEXT    NOT NULL CHECK (kind IN ('listing', 'orders', 'logistics')),
    spec        TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(spec)),
    status      TEXT    NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'finished')),
    total_items INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    finished_at INTEGER
);

-- One row per item of a job; seq numbers items 0..n so chunk = seq / chunk_size.
CREATE TABLE job_items (
    job_id        INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    item_key      TEXT    NOT NULL,
    seq           INTEGER NOT NULL,
    status        TEXT    NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'done', 'stale', 'failed', 'skipped')),
    error_class   TEXT    CHECK (error_class IN ('retry', 'slow', 'fatal', 'unknown')),
    error_message TEXT,
    result        TEXT,
    attempts      INTEGER NOT NULL DEFAULT 0,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (job_id, item_key)
) WITHOUT ROWID;

CREATE INDEX job_items_status ON job_items (job_id, status);
CREATE UNIQUE INDEX job_items_seq ON job_items (job_id, seq);

-- Orders as last synced. `shipped` is the adapter's reading of the platform status
-- ("shipped, not yet received"): statuses differ per platform, the ledger stays neutral.
CREATE TABLE orders (
    platform        TEXT    NOT NULL,
    order_id        TEXT    NOT NULL,
    shop            TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    shipped         INTEGER NOT NULL DEFAULT 0 CHECK (shipped IN (0, 1)),
    modified        INTEGER NOT NULL,
    amount_cents    INTEGER NOT NULL DEFAULT 0,
    last_status     TEXT,
    signed          INTEGER NOT NULL DEFAULT 0 CHECK (signed IN (0, 1)),
    last_queried_at INTEGER,
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (platform, order_id)
) WITHOUT ROWID;

-- Serves logistics_candidates: unsigned shipped orders of one shop, in order_id order,
-- with last_queried_at in the index so the interval filter reads no table rows.
CREATE INDEX orders_logistics ON orders (platform, shop, signed, shipped, order_id, last_queried_at);

-- Trace events, deduplicated by the UNIQUE key (INSERT OR IGNORE: one affected row = new data).
-- event_time is the platform's own timestamp text.
CREATE TABLE logistics_events (
    platform    TEXT    NOT NULL,
    order_id    TEXT    NOT NULL,
    event_time  TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    description TEXT    NOT NULL DEFAULT '',
    stored_at   INTEGER NOT NULL,
    UNIQUE (platform, order_id, event_time, status)
);

-- Calls per minute, (platform, api) and outcome class; `useful` counts calls that brought new data.
CREATE TABLE api_calls (
    minute   TEXT    NOT NULL,
    platform TEXT    NOT NULL,
    api      TEXT    NOT NULL,
    class    TEXT    NOT NULL CHECK (class IN ('ok', 'retry', 'slow', 'fatal', 'unknown', 'stale')),
    calls    INTEGER NOT NULL DEFAULT 0,
    useful   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, platform, api, class)
) WITHOUT ROWID;

-- Audit trail of run-time gate changes (who / when / why).
CREATE TABLE gate_changes (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    at        INTEGER NOT NULL,
    who       TEXT    NOT NULL,
    platform  TEXT    NOT NULL,
    api       TEXT    NOT NULL,
    old_rate  REAL,
    new_rate  REAL    NOT NULL,
    old_burst INTEGER,
    new_burst INTEGER,
    why       TEXT    NOT NULL
);

-- Last good read response per key, for degraded (stale: true) answers in embedded mode.
CREATE TABLE stale_cache (
    platform  TEXT    NOT NULL,
    api       TEXT    NOT NULL,
    key       TEXT    NOT NULL,
    body      TEXT    NOT NULL CHECK (json_valid(body)),
    stored_at INTEGER NOT NULL,
    PRIMARY KEY (platform, api, key)
) WITHOUT ROWID;

-- A lease with heartbeat that refuses a second embedded worker process on the same ledger.
CREATE TABLE embedded_lock (
    name         TEXT    PRIMARY KEY,
    holder       TEXT    NOT NULL,
    pid          INTEGER NOT NULL,
    acquired_at  INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
);

-- Progress per job: counts per status and percent terminal.
CREATE VIEW job_progress AS
SELECT j.id AS job_id,
       j.kind AS kind,
       j.status AS job_status,
       j.total_items AS total,
       COALESCE(SUM(i.status = 'pending'), 0) AS pending,
       COALESCE(SUM(i.status = 'done'), 0) AS done,
       COALESCE(SUM(i.status = 'stale'), 0) AS stale,
       COALESCE(SUM(i.status = 'failed'), 0) AS failed,
       COALESCE(SUM(i.status = 'skipped'), 0) AS skipped,
       CASE WHEN j.total_items = 0 THEN 100.0
            ELSE ROUND(100.0 * COALESCE(SUM(i.status <> 'pending'), 0) / j.total_items, 2)
       END AS percent
FROM jobs j
LEFT JOIN job_items i ON i.job_id = j.id
GROUP BY j.id;

-- Calls vs useful calls per (platform, api) over all time; filter api_calls by minute for a day.
CREATE VIEW calls_by_api AS
SELECT platform,
       api,
       SUM(calls) AS calls,
       SUM(useful) AS useful,
       CASE WHEN SUM(calls) = 0 THEN 0.0 ELSE ROUND(1.0 * SUM(useful) / SUM(calls), 4) END AS useful_ratio
FROM api_calls
GROUP BY platform, api;
