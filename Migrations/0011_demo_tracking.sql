-- The demo tracking API (`/demo/tracking`, served in development when no tracking service is
-- configured): a parcel redirected to a pickup point. One redirect per parcel; the
-- Idempotency-Key of the request that made it answers its retries with the same reply.
CREATE TABLE demo_parcel_redirects (
    label text PRIMARY KEY REFERENCES shipments (label),
    location text NOT NULL REFERENCES dropoff_locations (code),
    idempotency_key text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);
