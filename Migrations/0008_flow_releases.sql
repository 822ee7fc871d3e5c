-- Live flow releases (docs/releases.md): a bundle of flows, screens, contract, deep-link
-- allowlist (and services) published to PostgreSQL as one immutable release, addressed by the
-- hash of its content. Replicas LISTEN on 'baton_releases' and swap to the current release in
-- seconds; without any release they serve Flows/ from disk.

CREATE TABLE flow_releases (
    -- SHA-256 of the files (paths and contents, in path order), hex: the release's address.
    id text PRIMARY KEY,
    -- {"relative/path.yaml": "file content", ...}
    files jsonb NOT NULL,
    message text NOT NULL DEFAULT '',
    published_by text NOT NULL,
    published_at timestamptz NOT NULL DEFAULT now()
);

-- Which release is current, and which one ramps (a share of new sessions of the flows it
-- changes start on it). One row; every change is also appended to flow_release_events.
CREATE TABLE flow_release_state (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    current_release text REFERENCES flow_releases (id),
    ramp_release text REFERENCES flow_releases (id),
    ramp_percent integer NOT NULL DEFAULT 0 CHECK (ramp_percent BETWEEN 0 AND 100),
    -- Bumped by every change, so a replica can tell whether it has seen the latest.
    version bigint NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO flow_release_state (singleton) VALUES (true);

-- What happened, in order: publish, ramp, promote, rollback (the dashboard's annotations).
CREATE TABLE flow_release_events (
    id bigserial PRIMARY KEY,
    action text NOT NULL CHECK (action IN ('publish', 'ramp', 'promote', 'rollback')),
    release text NOT NULL REFERENCES flow_releases (id),
    previous text,
    ramp_percent integer,
    actor text NOT NULL,
    message text NOT NULL DEFAULT '',
    at timestamptz NOT NULL DEFAULT now()
);

-- Each replica reports the state version it loaded, or why it could not: a publisher waits for
-- these to tell its user whether every replica took the release.
CREATE TABLE flow_release_reports (
    replica text NOT NULL,
    state_version bigint NOT NULL,
    release text NOT NULL,
    ok boolean NOT NULL,
    detail text NOT NULL DEFAULT '',
    at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (replica, state_version)
);
