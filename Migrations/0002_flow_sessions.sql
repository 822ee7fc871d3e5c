-- Flow sessions, the command log (the idempotency record), and flow definitions by hash.

-- Every flow definition a session has run on, by the SHA-256 of its file: a session keeps the
-- rules it started with even after the file changes.
CREATE TABLE flow_definitions (
    hash text PRIMARY KEY,
    flow text NOT NULL,
    source text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE flow_sessions (
    id uuid PRIMARY KEY,
    subject text NOT NULL,
    flow text NOT NULL,
    definition_hash text NOT NULL REFERENCES flow_definitions (hash),
    state text NOT NULL,
    step integer NOT NULL CHECK (step >= 0),
    context jsonb NOT NULL DEFAULT '{}',
    status text NOT NULL CHECK (status IN ('active', 'completed', 'cancelled', 'expired')),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);

-- The expiry sweeper looks for active sessions past their time.
CREATE INDEX flow_sessions_active_expiry ON flow_sessions (expires_at) WHERE status = 'active';
CREATE INDEX flow_sessions_subject ON flow_sessions (subject, created_at);

-- One row per processed (session, step, event): a repeat returns the stored response, byte for
-- byte, instead of running the step again.
CREATE TABLE command_log (
    session_id uuid NOT NULL REFERENCES flow_sessions (id) ON DELETE CASCADE,
    step integer NOT NULL,
    event text NOT NULL,
    response text NOT NULL,
    outcome text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, step, event)
);

-- A counter per subject, bumped whenever the subject starts a flow. Start actions carry it, so
-- a screen rendered after a start offers fresh start actions while a repeated tap on the same
-- action still finds the session it started.
CREATE TABLE subject_generations (
    subject text PRIMARY KEY,
    generation bigint NOT NULL
);
