-- Baseline: the tables the foundation itself needs.
-- schema_migrations is created by the migrator; this file records the starting point and
-- holds the table the database-backed benchmark endpoint uses.

-- A per-subject counter touched by GET/POST /v1/probe: one row locked, updated and logged in
-- one transaction, the same statements a flow command issues.
CREATE TABLE probe_counters (
    subject text PRIMARY KEY,
    hits bigint NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE probe_log (
    id bigserial PRIMARY KEY,
    subject text NOT NULL,
    hits bigint NOT NULL,
    at timestamptz NOT NULL DEFAULT now()
);
