-- Continuous sync (docs/design.md, "Continuous sync").
--
-- `schedules`: a recurring order or logistics sync of one shop. `next_tick` (unix ms, the
-- ledger's clock) is the next tick due; the worker that moves it on (compare-and-set on its
-- old value) decides that tick, so each tick is decided once, fleet-wide.
-- `schedule_runs`: one row per decided tick (the primary key refuses a second): started (with
-- its job and, for orders, the window it covers), skipped, queued or missed; a started run
-- whose job finished is settled `covered` (every item ended done or skipped) or `failed`.
-- `sync_watermarks`: per shop, orders modified before `covered_to` are in the ledger; only a
-- covered run whose window starts at or before it moves it on, so coverage is contiguous.

CREATE TABLE schedules (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    kind        TEXT    NOT NULL CHECK (kind IN ('orders', 'logistics')),
    platform    TEXT    NOT NULL,
    shop        TEXT    NOT NULL,
    every_ms    INTEGER NOT NULL CHECK (every_ms > 0),
    lag_ms      INTEGER NOT NULL CHECK (lag_ms >= 0),
    overlap_ms  INTEGER NOT NULL CHECK (overlap_ms >= 0),
    on_overlap  TEXT    NOT NULL CHECK (on_overlap IN ('skip', 'queue')),
    catch_up    INTEGER NOT NULL CHECK (catch_up >= 1),
    lane        TEXT    NOT NULL,
    paused      INTEGER NOT NULL DEFAULT 0,
    next_tick   INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    UNIQUE (kind, platform, shop)
);

CREATE TABLE schedule_runs (
    schedule_id INTEGER NOT NULL,
    tick        INTEGER NOT NULL,
    outcome     TEXT    NOT NULL
                CHECK (outcome IN ('started', 'queued', 'skipped', 'missed', 'covered', 'failed')),
    note        TEXT,
    job_id      INTEGER,
    window_from INTEGER,
    window_to   INTEGER,
    decided_at  INTEGER NOT NULL,
    settled_at  INTEGER,
    PRIMARY KEY (schedule_id, tick)
);

CREATE INDEX schedule_runs_open ON schedule_runs (outcome) WHERE outcome IN ('started', 'queued');

CREATE TABLE sync_watermarks (
    platform   TEXT    NOT NULL,
    shop       TEXT    NOT NULL,
    covered_to INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (platform, shop)
);
