-- The built-in flows' domain: a music catalog with user playlists and favourites, and parcel
-- drop-offs for Scan & Go. The built-in effects, guards and loaders are the only writers.

-- Playlists: owner NULL means a public catalog playlist; otherwise a user's ("user:<id>").
CREATE TABLE playlists (
    id uuid PRIMARY KEY,
    owner text,
    -- The flows allow 1–100 characters as people see them (grapheme clusters) and at most four
    -- code points per character (combining marks); char_length counts code points.
    name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 400),
    description text,
    artwork text,
    is_public boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
-- One name per owner, compared case-insensitively ("Road Trip" and "road trip" collide).
CREATE UNIQUE INDEX playlists_owner_name ON playlists (owner, lower(name)) WHERE owner IS NOT NULL;
CREATE INDEX playlists_public ON playlists (name) WHERE is_public;

CREATE TABLE tracks (
    id uuid PRIMARY KEY,
    title text NOT NULL,
    artist text NOT NULL,
    duration_seconds integer NOT NULL CHECK (duration_seconds > 0),
    artwork text
);

CREATE TABLE playlist_tracks (
    playlist_id uuid NOT NULL REFERENCES playlists (id) ON DELETE CASCADE,
    track_id uuid NOT NULL REFERENCES tracks (id),
    position integer NOT NULL,
    added_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (playlist_id, track_id)
);
CREATE INDEX playlist_tracks_order ON playlist_tracks (playlist_id, position);

CREATE TABLE favourites (
    subject text NOT NULL,
    playlist_id uuid NOT NULL REFERENCES playlists (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (subject, playlist_id)
);

CREATE TABLE dropoff_locations (
    code text PRIMARY KEY CHECK (code ~ '^UT-[0-9]{4}$'),
    name text NOT NULL,
    address text NOT NULL
);

-- A registered parcel; its label code is the key: whoever holds the parcel may drop it off.
CREATE TABLE shipments (
    label text PRIMARY KEY CHECK (label ~ '^3S[A-Z0-9]{8,11}$'),
    recipient text NOT NULL,
    postcode text NOT NULL,
    size text NOT NULL CHECK (size IN ('S', 'M', 'L')),
    registered_at timestamptz NOT NULL DEFAULT now()
);

-- At most one drop-off per parcel, enforced by the unique label.
CREATE TABLE dropoffs (
    id uuid PRIMARY KEY,
    label text NOT NULL UNIQUE REFERENCES shipments (label),
    location text NOT NULL REFERENCES dropoff_locations (code),
    subject text NOT NULL,
    receipt text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);
