-- Completion hooks (docs/design.md, "Completion hooks"): one delivery per finish of a job
-- (a job revived by `retry` that finishes again is another finish), kept until the receiver
-- acknowledged it with a 2xx or the attempts ran out. A worker delivers one only while it
-- holds its claim (`claimed_until`), so two workers never send it at once.
-- `hook_state.since`: jobs that finished before hooks were first run get none; `looked_to`: the
-- newest finish already looked at (a look re-reads a minute before it, for transactions
-- that committed late), so a look reads the new finishes only (`jobs_finished_at`).

CREATE TABLE hook_deliveries (
    job_id        INTEGER NOT NULL,
    finished_at   INTEGER NOT NULL,
    state         TEXT    NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts      INTEGER NOT NULL DEFAULT 0,
    next_at       INTEGER NOT NULL,
    claimed_until INTEGER,
    last_error    TEXT,
    delivered_at  INTEGER,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (job_id, finished_at)
);

CREATE INDEX hook_deliveries_pending ON hook_deliveries (next_at) WHERE state = 'pending';

CREATE TABLE hook_state (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    since     INTEGER NOT NULL,
    looked_to INTEGER NOT NULL
);

CREATE INDEX jobs_finished_at ON jobs (finished_at) WHERE finished_at IS NOT NULL;
