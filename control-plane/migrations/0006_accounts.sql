-- Accounts in the browser (issue 32): a password per user and the sessions
-- of the router's account pages.

-- argon2id PHC string; NULL: the user cannot sign in (operator-made users
-- until `control-plane users set-password`).
ALTER TABLE users ADD COLUMN password_hash text;

CREATE TABLE sessions (
    -- SHA-256 of the cookie's token: the token itself is never stored.
    token_sha256 bytea PRIMARY KEY CHECK (length(token_sha256) = 32),
    user_id      text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- The session's form (CSRF) token, compared with every form it posts.
    csrf_token   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    -- Touched on every resolve; a session unseen for SESSION_IDLE_SECS ends.
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    -- created_at + SESSION_TTL_SECS: the session ends then whatever its use.
    expires_at   timestamptz NOT NULL
);
CREATE INDEX sessions_user_id ON sessions (user_id);
CREATE INDEX sessions_expires_at ON sessions (expires_at);
