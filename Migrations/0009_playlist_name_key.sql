-- Playlist names are unique per owner as people read them: "Café" typed composed or decomposed,
-- "Road Trip" and "road trip", "STRASSE" and "straße" are one name. lower(name) saw none of
-- the composition forms and, with the cluster's C locale, only ASCII case. The key is computed
-- in Swift (Unicode NFC, then full case folding, then NFC again: Playlists.nameKey) and stored
-- next to the name, so PostgreSQL's locale does not decide what counts as the same name.

ALTER TABLE playlists ADD COLUMN name_key text;

-- Backfill for rows written before the key existed. PostgreSQL 15 has no case folding, so this is
-- the nearest SQL can get (NFC, then lower-case); it agrees with the Swift key for ASCII names and
-- for composition. A row whose key differs gets the Swift key when it is next renamed.
UPDATE playlists SET name_key = lower(normalize(name, NFC)) WHERE owner IS NOT NULL;

-- Names that only now compare equal (the same word composed and decomposed) were allowed under
-- the old index. Keep the oldest one's key; the others get their id appended after U+0001, which
-- text input refuses, so no name typed later can produce it. The index can be built; no name is lost.
UPDATE playlists p SET name_key = p.name_key || chr(1) || p.id::text
FROM (
    SELECT id, row_number() OVER (PARTITION BY owner, name_key ORDER BY created_at, id) AS n
    FROM playlists WHERE owner IS NOT NULL
) ranked
WHERE ranked.id = p.id AND ranked.n > 1;

-- A user's playlist always has a key; catalog playlists (owner NULL) need none.
ALTER TABLE playlists ADD CONSTRAINT playlists_owned_have_name_key CHECK (owner IS NULL OR name_key IS NOT NULL);

CREATE UNIQUE INDEX playlists_owner_name_key ON playlists (owner, name_key) WHERE owner IS NOT NULL;
DROP INDEX playlists_owner_name;
