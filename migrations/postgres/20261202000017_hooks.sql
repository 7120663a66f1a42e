-- Completion hooks (docs/design.md, "Completion hooks"): one delivery per finish of a job
-- (a job revived by `retry` that finishes again is another finish), kept until the receiver
-- acknowledged it with a 2xx or the attempts ran out. A worker delivers one only while it
-- holds its claim (`claimed_until`), so two workers never send it at once.
-- `hook_state.since`: jobs that finished before hooks were first run get none; `looked_to`: the
-- newest finish already looked at (a look re-reads a minute before it, for transactions
-- that committed late), so a look reads the new finishes only (`jobs_finished_at`).

CREATE TABLE hook_deliveries (
    job_id        BIGINT  NOT NULL,
    finished_at   BIGINT  NOT NULL,
    state         TEXT    NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts      BIGINT  NOT NULL DEFAULT 0,
    next_at       BIGINT  NOT NULL,
    claimed_until BIGINT,
    last_error    TEXT,
    delivered_at  BIGINT,
    created_at    BIGINT  NOT NULL,
    PRIMARY KEY (job_id, finished_at)
);

CREATE INDEX hook_deliveries_pending ON hook_deliveries (next_at) WHERE state = 'pending';

CREATE TABLE hook_state (
    id        BIGINT  PRIMARY KEY CHECK (id = 1),
    since     BIGINT  NOT NULL,
    looked_to BIGINT  NOT NULL
);

CREATE INDEX jobs_finished_at ON jobs (finished_at) WHERE finished_at IS NOT NULL;
