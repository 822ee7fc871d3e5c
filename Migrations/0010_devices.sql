-- Anonymous devices (App Clips): the first request with a new X-Device-Id registers it and is
-- answered with a server-signed X-Device-Token; later requests for that device must carry it
-- (PROTOCOL §1). The row only says the id is taken; the token itself is an HMAC, not stored.
CREATE TABLE devices (
    id uuid PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now()
);
