-- A command's identity is the request, not only its payload (PROTOCOL §3, replay rules v2).
--
-- The command log keeps, beside each stored response, a digest of the normalised input that
-- produced it. A repeat with the same payload and the same input gets the stored bytes; the
-- same payload with another input is told its screen was out of date and changes nothing.
-- Rows logged before this migration have no digest and replay as they always did.
ALTER TABLE command_log ADD COLUMN input_digest text;

-- Idempotency keys of requests that are not commands (POST /v{N}/deeplinks/resolve), in the
-- IETF httpapi Idempotency-Key draft's sense: per caller (scope) and key, the digest of the
-- request that first used the key and the reply it got. Same key and body → that reply;
-- same key, other body → 422. Rows older than a day are swept.
CREATE TABLE idempotency_keys (
    scope text NOT NULL,
    key text NOT NULL,
    request_digest text NOT NULL,
    response text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

-- subject_generations is no longer read or written: start actions carry a nonce of their own
-- (each rendered button is its own instance). The table stays until every replica runs this
-- release, so a rolling deploy never breaks an older replica mid-way; a later migration drops it.
COMMENT ON TABLE subject_generations IS 'unused since 0007 (start nonces); dropped by a later migration';
