-- The control plane's catalog: users, API keys, memberships, support grants,
-- shards and the placement of every database.

CREATE TABLE users (
    id             text PRIMARY KEY,
    email          text NOT NULL,
    name           text NOT NULL,
    suspended_at   timestamptz,
    -- Bumped on every change of what the user may reach (memberships,
    -- support grants, a database of theirs becoming active or released).
    access_version bigint NOT NULL DEFAULT 1,
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

CREATE TABLE api_keys (
    id          text PRIMARY KEY,
    user_id     text NOT NULL REFERENCES users (id),
    name        text NOT NULL,
    -- argon2id PHC string of the secret.
    secret_hash text NOT NULL,
    access      text NOT NULL CHECK (access IN ('read_write', 'read_only')),
    -- NULL means every database of the user ("all"); otherwise the exact list.
    databases   text[],
    created_at  timestamptz NOT NULL DEFAULT now(),
    version     bigint NOT NULL DEFAULT 1
);
CREATE INDEX api_keys_user_id ON api_keys (user_id);

CREATE TABLE shards (
    name       text PRIMARY KEY,
    url        text NOT NULL,
    postgres   text NOT NULL,
    weight     integer NOT NULL CHECK (weight > 0),
    state      text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'draining')),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Feeds cluster_protocol::ids::tag_for_counter.
CREATE SEQUENCE database_tag_counter AS bigint MINVALUE 0 START WITH 0;

CREATE TABLE databases (
    id         text PRIMARY KEY,
    tag        text NOT NULL UNIQUE,
    owner_id   text NOT NULL REFERENCES users (id),
    shard      text NOT NULL REFERENCES shards (name),
    state      text NOT NULL CHECK (state IN ('creating', 'active')),
    position   bigint NOT NULL UNIQUE,
    epoch      bigint NOT NULL DEFAULT 1,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX databases_owner_id ON databases (owner_id);
CREATE INDEX databases_shard ON databases (shard);
CREATE INDEX databases_creating ON databases (created_at) WHERE state = 'creating';

CREATE TABLE memberships (
    database_id text NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
    user_id     text NOT NULL REFERENCES users (id),
    role        text NOT NULL CHECK (role IN ('viewer', 'editor', 'owner')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (database_id, user_id)
);
CREATE INDEX memberships_user_id ON memberships (user_id);

CREATE TABLE support_grants (
    database_id text NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
    user_id     text NOT NULL REFERENCES users (id),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (database_id, user_id)
);
CREATE INDEX support_grants_user_id ON support_grants (user_id);
