//! Every route of the control plane with the tiers that may call it: the one
//! table the server is built from and [`super::auth`] checks against. The
//! operator's admin token may call every route; a route lists the other
//! tiers that may call it too (none: admin only).
//!
//! | tier | token | routes |
//! |---|---|---|
//! | admin | `CONTROL_PLANE_TOKEN` | all |
//! | router | `CONTROL_PLANE_ROUTER_TOKEN` | key and access reads, placements, allocate/confirm/release, the acted-by member routes, the session routes of the account pages |
//! | shard | `CONTROL_PLANE_SHARD_TOKEN` | placement reads |
//! | metrics | `METRICS_TOKEN` | `GET /metrics` |
//!
//! No route a router, shard or metrics token may call returns a database
//! password: shards' DSNs (`GET /internal/shards`) are the operator's.

use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{on, MethodFilter, MethodRouter};

use super::{
    accounts, databases, keys, members, moves, quotas, rebalance, restores, shards, users,
};
use crate::AppState;

/// A caller of the control plane, known by its token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    Admin,
    Router,
    Shard,
    Metrics,
}

impl Tier {
    pub const ALL: [Tier; 4] = [Tier::Admin, Tier::Router, Tier::Shard, Tier::Metrics];

    /// Its name in messages and the README.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Admin => "admin",
            Tier::Router => "router",
            Tier::Shard => "shard",
            Tier::Metrics => "metrics",
        }
    }
}

const ADMIN: &[Tier] = &[];
const ROUTER: &[Tier] = &[Tier::Router];
const PLACEMENT_READERS: &[Tier] = &[Tier::Router, Tier::Shard];
const SCRAPER: &[Tier] = &[Tier::Metrics];

/// One row of the table.
pub struct Route {
    pub method: Method,
    /// axum's template (`{id}` segments), as `MatchedPath` reports it.
    pub path: &'static str,
    /// Tiers besides the admin that may call it.
    pub also: &'static [Tier],
    pub(super) handler: MethodRouter<AppState>,
}

impl Route {
    pub fn allows(&self, tier: Tier) -> bool {
        tier == Tier::Admin || self.also.contains(&tier)
    }
}

fn route<H, T>(method: Method, path: &'static str, handler: H, also: &'static [Tier]) -> Route
where
    H: Handler<T, AppState>,
    T: 'static,
{
    let filter = MethodFilter::try_from(method.clone()).expect("the table uses standard methods");
    Route {
        method,
        path,
        also,
        handler: on(filter, handler),
    }
}

/// Every protected route (all but `GET /internal/health`).
#[rustfmt::skip]
pub fn table() -> Vec<Route> {
    use Method as M;
    vec![
        // What routers read to authenticate and route a request.
        route(M::GET,    "/internal/keys/{key_id}",                     keys::fetch,                   ROUTER),
        route(M::GET,    "/internal/users/{user_id}/access",            users::access,                 ROUTER),
        route(M::GET,    "/internal/placements/{tag}",                  databases::placement,          PLACEMENT_READERS),
        route(M::POST,   "/internal/placements/lookup",                 databases::lookup,             PLACEMENT_READERS),
        // Database creation through the public API.
        route(M::POST,   "/internal/databases/allocate",                databases::allocate,           ROUTER),
        route(M::POST,   "/internal/databases/{id}/confirm",            databases::confirm,            ROUTER),
        route(M::POST,   "/internal/databases/{id}/release",            databases::release,            ROUTER),
        // Member management of the public API: the control plane checks the
        // acting user's ownership itself (see `cluster_protocol::control`).
        route(M::GET,    "/internal/databases/{id}/members",            members::list_of_database,     ROUTER),
        route(M::POST,   "/internal/databases/{id}/members",            members::add_to_database,      ROUTER),
        route(M::PATCH,  "/internal/databases/{id}/members/{user_id}",  members::change_role,          ROUTER),
        route(M::DELETE, "/internal/databases/{id}/members/{user_id}",  members::remove_from_database, ROUTER),
        // The account pages (`cluster_protocol::control::accounts`): a
        // session acts on its own user only, checked by the control plane.
        route(M::GET,    "/internal/accounts/settings",                 accounts::settings,            ROUTER),
        route(M::POST,   "/internal/accounts/signup",                   accounts::sign_up,             ROUTER),
        route(M::POST,   "/internal/accounts/signin",                   accounts::sign_in,             ROUTER),
        route(M::POST,   "/internal/sessions/resolve",                  accounts::resolve,             ROUTER),
        route(M::POST,   "/internal/sessions/account",                  accounts::account,             ROUTER),
        route(M::POST,   "/internal/sessions/signout",                  accounts::sign_out,            ROUTER),
        route(M::POST,   "/internal/sessions/password",                 accounts::change_password,     ROUTER),
        route(M::POST,   "/internal/sessions/keys",                     accounts::create_key,          ROUTER),
        route(M::POST,   "/internal/sessions/keys/{key_id}",            accounts::update_key,          ROUTER),
        route(M::POST,   "/internal/sessions/keys/{key_id}/revoke",     accounts::revoke_key,          ROUTER),
        route(M::GET,    "/metrics",                                    crate::metrics::handler,       SCRAPER),
        // The operator's.
        route(M::POST,   "/internal/keys",                              keys::create,                  ADMIN),
        route(M::PATCH,  "/internal/keys/{key_id}",                     keys::update,                  ADMIN),
        route(M::DELETE, "/internal/keys/{key_id}",                     keys::revoke,                  ADMIN),
        route(M::GET,    "/internal/users",                             users::list,                   ADMIN),
        route(M::POST,   "/internal/users",                             users::create,                 ADMIN),
        route(M::GET,    "/internal/users/{user_id}/keys",              users::keys,                   ADMIN),
        route(M::POST,   "/internal/users/{user_id}/suspend",           users::suspend,                ADMIN),
        route(M::POST,   "/internal/users/{user_id}/unsuspend",         users::unsuspend,              ADMIN),
        route(M::PUT,    "/internal/users/{user_id}/password",          accounts::set_password,        ADMIN),
        route(M::GET,    "/internal/databases",                         databases::list,               ADMIN),
        route(M::GET,    "/internal/databases/{id}",                    databases::show,               ADMIN),
        route(M::POST,   "/internal/members",                           members::add,                  ADMIN),
        route(M::DELETE, "/internal/members",                           members::remove,               ADMIN),
        route(M::POST,   "/internal/support",                           members::grant,                ADMIN),
        route(M::DELETE, "/internal/support",                           members::revoke,               ADMIN),
        route(M::GET,    "/internal/shards",                            shards::list,                  ADMIN),
        route(M::POST,   "/internal/shards",                            shards::add,                   ADMIN),
        route(M::POST,   "/internal/shards/{name}/drain",               shards::drain,                 ADMIN),
        route(M::POST,   "/internal/shards/{name}/activate",            shards::activate,              ADMIN),
        route(M::GET,    "/internal/moves",                             moves::list,                   ADMIN),
        route(M::POST,   "/internal/moves",                             moves::create,                 ADMIN),
        route(M::GET,    "/internal/moves/{id}",                        moves::show,                   ADMIN),
        route(M::POST,   "/internal/moves/{id}/abort",                  moves::abort,                  ADMIN),
        route(M::POST,   "/internal/rebalance",                         rebalance::rebalance,          ADMIN),
        route(M::POST,   "/internal/databases/{id}/restore",            restores::create,              ADMIN),
        route(M::GET,    "/internal/restores",                          restores::list,                ADMIN),
        route(M::GET,    "/internal/restores/{id}",                     restores::show,                ADMIN),
        route(M::GET,    "/internal/users/{user_id}/quotas",            quotas::show,                  ADMIN),
        route(M::PUT,    "/internal/users/{user_id}/quotas",            quotas::set,                   ADMIN),
        route(M::GET,    "/internal/users/{user_id}/usage",             quotas::usage,                 ADMIN),
        route(M::GET,    "/internal/usage",                             quotas::top,                   ADMIN),
    ]
}

/// The table without handlers: (method, template, tiers that may call it).
pub fn scopes() -> Vec<(Method, &'static str, Vec<Tier>)> {
    table()
        .into_iter()
        .map(|r| {
            let tiers = Tier::ALL.into_iter().filter(|t| r.allows(*t)).collect();
            (r.method, r.path, tiers)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(method: Method, path: &str, tier: Tier) -> bool {
        table()
            .iter()
            .find(|r| r.method == method && r.path == path)
            .unwrap_or_else(|| panic!("{method} {path} is not in the table"))
            .allows(tier)
    }

    #[test]
    fn admin_may_call_every_route_and_rows_are_unique() {
        let rows = table();
        for (i, r) in rows.iter().enumerate() {
            assert!(r.allows(Tier::Admin), "{} {}", r.method, r.path);
            assert!(
                !rows[i + 1..]
                    .iter()
                    .any(|o| o.method == r.method && o.path == r.path),
                "{} {} twice",
                r.method,
                r.path
            );
        }
    }

    #[test]
    fn no_tier_but_admin_may_write_keys_users_members_or_shards() {
        for (method, path) in [
            (Method::POST, "/internal/keys"),
            (Method::PATCH, "/internal/keys/{key_id}"),
            (Method::DELETE, "/internal/keys/{key_id}"),
            (Method::POST, "/internal/users"),
            (Method::POST, "/internal/users/{user_id}/suspend"),
            (Method::PUT, "/internal/users/{user_id}/password"),
            (Method::GET, "/internal/users"),
            (Method::GET, "/internal/users/{user_id}/keys"),
            (Method::POST, "/internal/members"),
            (Method::POST, "/internal/support"),
            (Method::GET, "/internal/shards"),
            (Method::POST, "/internal/shards"),
            (Method::POST, "/internal/shards/{name}/drain"),
            (Method::POST, "/internal/moves"),
            (Method::POST, "/internal/moves/{id}/abort"),
            (Method::POST, "/internal/rebalance"),
            (Method::POST, "/internal/databases/{id}/restore"),
            (Method::GET, "/internal/restores"),
            (Method::PUT, "/internal/users/{user_id}/quotas"),
            (Method::GET, "/internal/users/{user_id}/usage"),
            (Method::GET, "/internal/usage"),
        ] {
            for tier in [Tier::Router, Tier::Shard, Tier::Metrics] {
                assert!(
                    !allowed(method.clone(), path, tier),
                    "{tier:?} on {method} {path}"
                );
            }
        }
    }

    #[test]
    fn each_tier_gets_only_what_it_reads() {
        let of = |tier: Tier| {
            scopes()
                .into_iter()
                .filter(|(_, _, tiers)| tiers.contains(&tier))
                .map(|(m, p, _)| format!("{m} {p}"))
                .collect::<Vec<_>>()
        };
        assert_eq!(of(Tier::Metrics), ["GET /metrics"]);
        assert_eq!(
            of(Tier::Shard),
            [
                "GET /internal/placements/{tag}",
                "POST /internal/placements/lookup"
            ]
        );
        assert_eq!(of(Tier::Router).len(), 21);
        assert!(!of(Tier::Router).contains(&"GET /metrics".to_string()));
    }
}
