-- Attachments (part A "Attachment registry entry", part B "Attachments").
--
-- The bytes live in the cluster-wide blob store under
-- `<database_id>/<attachment_id>/<variant>` (blobstore::key); only the
-- registry lives here, keyed by database id so a database move carries it.

CREATE TABLE attachments (
    id           text PRIMARY KEY,
    database_id  text NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
    table_id     text NOT NULL REFERENCES tables (id) ON DELETE CASCADE,
    field_id     text NOT NULL REFERENCES fields (id) ON DELETE CASCADE,
    -- The one record it may be written into (no foreign key: records live
    -- in the tenant schema; purge deletes these rows explicitly).
    record_id    text NOT NULL,
    -- Stored verbatim (UTF-8), as uploaded or as the URL fetch named it.
    filename     text NOT NULL,
    size_bytes   bigint NOT NULL CHECK (size_bytes >= 0),
    content_type text NOT NULL,
    -- Whether the two WebP derivatives were made (else thumb_url and
    -- card_url are the original's url).
    thumbnails   boolean NOT NULL DEFAULT false,
    -- Whether a cell holds it. An upload is unplaced until a write puts its
    -- id into the cell; unplaced uploads older than a day are swept.
    placed       boolean NOT NULL DEFAULT false,
    created_by   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX attachments_record ON attachments (table_id, record_id);
CREATE INDEX attachments_database_order ON attachments (database_id, created_at, id);
CREATE INDEX attachments_unplaced ON attachments (created_at) WHERE NOT placed;

-- Original bytes held per database (the 100 GB ceiling of part C), kept by
-- the upload path (charged) and the garbage trigger below (released).
ALTER TABLE databases ADD COLUMN attachment_bytes bigint NOT NULL DEFAULT 0;

-- Bytes to delete from the blob store once the deleting transaction has
-- committed: filled by the trigger below whatever deleted the registry row
-- (a cell write dropping an id, purge, a field, table or database delete),
-- emptied by the blob sweeper. No foreign key: the database may be gone.
CREATE TABLE blob_garbage (
    attachment_id text PRIMARY KEY,
    database_id   text NOT NULL,
    thumbnails    boolean NOT NULL,
    due_at        timestamptz NOT NULL DEFAULT now(),
    attempts      integer NOT NULL DEFAULT 0,
    last_error    text
);
CREATE INDEX blob_garbage_due ON blob_garbage (due_at);

CREATE FUNCTION attachments_collect_garbage() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM gone) THEN
        RETURN NULL;
    END IF;
    INSERT INTO blob_garbage (attachment_id, database_id, thumbnails)
    SELECT id, database_id, thumbnails FROM gone
    ON CONFLICT (attachment_id) DO NOTHING;
    UPDATE databases d
       SET attachment_bytes = greatest(0, d.attachment_bytes - g.bytes)
      FROM (SELECT database_id, sum(size_bytes) AS bytes FROM gone GROUP BY database_id) g
     WHERE d.id = g.database_id;
    PERFORM pg_notify('blob_garbage', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER attachments_garbage
    AFTER DELETE ON attachments
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION attachments_collect_garbage();
