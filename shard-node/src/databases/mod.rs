//! `/api/databases` routes a shard answers (create, rename/colour, delete)
//! and `POST /internal/databases/lookup`, the router's fan-out for
//! `GET /api/databases`.

pub mod create;
pub mod delete;
pub mod list;
pub mod update;

/// The twelve colours a database may take (part A), besides null.
pub const PIGMENTS: [&str; 12] = [
    "pomegranate",
    "henna",
    "saffron",
    "ochre",
    "olive",
    "emerald",
    "verdigris",
    "nile",
    "lapis",
    "indigo",
    "violet",
    "rose",
];
