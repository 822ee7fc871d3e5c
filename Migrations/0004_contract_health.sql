-- Contract health over time: what each app version in the wild was served, one row per UTC
-- day and client bucket. Prometheus counters reset with each process; this does not.
--
-- Each replica aggregates in memory and adds its counts here in batches (one upsert per
-- bucket per flush interval), so several replicas add into the same rows without losing
-- each other's counts. Buckets are the bounded metric labels: platform from a fixed set, the
-- contract version served, the app version as major.minor (capped; the rest 'other').
CREATE TABLE contract_health_daily (
    day date NOT NULL,
    platform text NOT NULL,
    contract integer NOT NULL,
    app_version text NOT NULL,
    -- Screens and replies fitted for this bucket (update-required answers included).
    requests bigint NOT NULL DEFAULT 0 CHECK (requests >= 0),
    -- Components sent (the denominator of the fallback hit rate).
    components_rendered bigint NOT NULL DEFAULT 0 CHECK (components_rendered >= 0),
    -- Components or actions replaced by their fallback.
    fallback_hits bigint NOT NULL DEFAULT 0 CHECK (fallback_hits >= 0),
    -- Components dropped before sending, whatever the reason.
    omissions bigint NOT NULL DEFAULT 0 CHECK (omissions >= 0),
    -- Requests below the oldest supported contract version (answered "update required").
    unsupported bigint NOT NULL DEFAULT 0 CHECK (unsupported >= 0),
    PRIMARY KEY (day, platform, contract, app_version)
);
