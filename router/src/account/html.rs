//! The account pages as HTML text: one layout, plain forms, every value
//! escaped with [`esc`] (names, emails, key names and ids, messages).
//! Element ids and form fields are the contract of the browser tests
//! (`notes/accounts-contract.md`; docs/security.md).

use chrono::{DateTime, Utc};
use cluster_protocol::control::accounts::AccountView;
use cluster_protocol::control::{Access, CreatedKey, DatabaseScope, KeyInfo};

/// `s` safe inside an element or a double- or single-quoted attribute.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The one script of the pages (the copy button); its SHA-256 is in the
/// Content-Security-Policy, so no other script runs.
pub const COPY_SCRIPT: &str = "document.getElementById('copy-secret').addEventListener('click',\
function(){var b=this;navigator.clipboard.writeText(document.getElementById('new-key-secret')\
.textContent).then(function(){b.textContent='Copied';});});";

pub const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:46rem;margin:1rem auto;\
padding:0 1rem;line-height:1.4;color:#222}h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}\
input,select,button{font:inherit;padding:.35rem;margin:.15rem 0;max-width:100%}\
label{display:block;margin:.4rem 0}table{border-collapse:collapse;width:100%;font-size:.9rem}\
td,th{border-bottom:1px solid #ddd;padding:.3rem;text-align:left;vertical-align:top}\
#error{color:#a00;font-weight:600}#notice{color:#060;font-weight:600}\
code{word-break:break-all;background:#f3f3f3;padding:.2rem}\
.key-forms form{display:inline-block;margin:.2rem .4rem .2rem 0}\
@media (max-width:40rem){table,tbody,tr,td{display:block}tr{margin-bottom:1rem}}";

/// A whole page around `main`.
pub fn layout(title: &str, main: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{}</title><style>{STYLE}</style></head><body><main>{main}</main></body></html>\n",
        esc(title)
    )
}

fn messages(error: Option<&str>, notice: Option<&str>) -> String {
    let mut out = String::new();
    if let Some(e) = error {
        out.push_str(&format!("<p id=\"error\">{}</p>", esc(e)));
    }
    if let Some(n) = notice {
        out.push_str(&format!("<p id=\"notice\">{}</p>", esc(n)));
    }
    out
}

fn csrf_field(token: &str) -> String {
    format!(
        "<input type=\"hidden\" name=\"csrf_token\" value=\"{}\">",
        esc(token)
    )
}

/// `GET /account/signin` (and its error answers).
pub fn signin(
    csrf: &str,
    email: &str,
    error: Option<&str>,
    notice: Option<&str>,
    signup_open: bool,
) -> String {
    let signup = if signup_open {
        "<p>No account yet? <a id=\"signup-link\" href=\"/account/signup\">Sign up</a>.</p>"
    } else {
        ""
    };
    let main = format!(
        "<h1>Sign in</h1>{}\
<form id=\"signin\" method=\"post\" action=\"/account/signin\">{}\
<label>Email <input type=\"email\" name=\"email\" value=\"{}\" autocomplete=\"username\" required></label>\
<label>Password <input type=\"password\" name=\"password\" autocomplete=\"current-password\" required></label>\
<button id=\"signin-submit\" type=\"submit\">Sign in</button></form>{signup}",
        messages(error, notice),
        csrf_field(csrf),
        esc(email),
    );
    layout("Sign in", &main)
}

/// `GET /account/signup` (and its error answers).
pub fn signup(csrf: &str, email: &str, name: &str, error: Option<&str>) -> String {
    let main = format!(
        "<h1>Sign up</h1>{}\
<form id=\"signup\" method=\"post\" action=\"/account/signup\">{}\
<label>Email <input type=\"email\" name=\"email\" value=\"{}\" autocomplete=\"username\" required></label>\
<label>Name <input type=\"text\" name=\"name\" value=\"{}\" autocomplete=\"name\"></label>\
<label>Password (at least 12 characters) <input type=\"password\" name=\"password\" \
autocomplete=\"new-password\" minlength=\"12\" required></label>\
<button id=\"signup-submit\" type=\"submit\">Sign up</button></form>\
<p>Have an account? <a href=\"/account/signin\">Sign in</a>.</p>",
        messages(error, None),
        csrf_field(csrf),
        esc(email),
        esc(name),
    );
    layout("Sign up", &main)
}

/// A page that only says what went wrong (closed sign-up, a refused form).
pub fn message_page(title: &str, error: &str) -> String {
    let main = format!(
        "<h1>{}</h1>{}<p><a href=\"/account\">Back to your account</a></p>",
        esc(title),
        messages(Some(error), None)
    );
    layout(title, &main)
}

/// `never`, or unix milliseconds as a UTC timestamp.
pub fn last_used_text(ms: Option<i64>) -> String {
    ms.and_then(DateTime::<Utc>::from_timestamp_millis)
        .map_or_else(|| "never".to_string(), |t| utc(&t))
}

fn utc(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

fn scope_text(scope: &DatabaseScope) -> String {
    match scope {
        DatabaseScope::All => "all".to_string(),
        DatabaseScope::Only(ids) => ids.join(","),
    }
}

fn access_select(current: Access) -> String {
    let option = |a: Access| {
        let selected = if a == current { " selected" } else { "" };
        format!("<option value=\"{0}\"{selected}>{0}</option>", a.as_str())
    };
    format!(
        "<select name=\"access\">{}{}</select>",
        option(Access::ReadWrite),
        option(Access::ReadOnly)
    )
}

fn database_boxes(databases: &[String], scope: &DatabaseScope) -> String {
    let mut out = String::new();
    for id in databases {
        let checked = match scope {
            DatabaseScope::Only(ids) if ids.contains(id) => " checked",
            _ => "",
        };
        out.push_str(&format!(
            "<label><input type=\"checkbox\" name=\"database\" value=\"{0}\"{checked}> {0}</label>",
            esc(id)
        ));
    }
    out
}

fn key_row(key: &KeyInfo, last_used: Option<i64>, databases: &[String], csrf: &str) -> String {
    let id = esc(&key.id);
    format!(
        "<tr class=\"key\" data-key-id=\"{id}\"><td class=\"key-name\">{name}</td>\
<td class=\"key-access\">{access}</td><td class=\"key-databases\">{scope}</td>\
<td class=\"key-created\">{created}</td><td class=\"key-last-used\">{used}</td>\
<td class=\"key-forms\">\
<form class=\"edit-key\" method=\"post\" action=\"/account/keys/{id}\">{csrf}\
<label>Name <input type=\"text\" name=\"name\" value=\"{name}\" required></label>{select}\
<fieldset><legend>Databases (none: all)</legend>{boxes}</fieldset>\
<button class=\"save\" type=\"submit\">Save</button></form>\
<form class=\"revoke-key\" method=\"post\" action=\"/account/keys/{id}/revoke\">{csrf}\
<button class=\"revoke\" type=\"submit\">Revoke</button></form></td></tr>",
        name = esc(&key.name),
        access = key.access.as_str(),
        scope = esc(&scope_text(&key.databases)),
        created = utc(&key.created_at),
        used = last_used_text(last_used),
        csrf = csrf_field(csrf),
        select = access_select(key.access),
        boxes = database_boxes(databases, &key.databases),
    )
}

/// `GET /account`: who is signed in, their keys (with `last_used`, in the
/// same order), the mint form, their databases, the password form.
pub fn account(
    view: &AccountView,
    last_used: &[Option<i64>],
    error: Option<&str>,
    notice: Option<&str>,
) -> String {
    let user = &view.session.user;
    let csrf = view.session.csrf_token.as_str();
    let databases: Vec<String> = view
        .databases
        .iter()
        .map(|m| m.database_id.clone())
        .collect();
    let rows: String = view
        .keys
        .iter()
        .enumerate()
        .map(|(i, k)| key_row(k, last_used.get(i).copied().flatten(), &databases, csrf))
        .collect();
    let dbs: String = view
        .databases
        .iter()
        .map(|m| {
            let id = esc(&m.database_id);
            format!(
                "<li data-database-id=\"{id}\"><span class=\"database-name\">{id}</span> \
({role}) <a class=\"export\" href=\"/api/databases/{id}/export\">Export (zip)</a></li>",
                role = m.role.as_str()
            )
        })
        .collect();
    let main = format!(
        "<h1>Your account</h1>{msgs}\
<p>Signed in as <span id=\"user-name\">{name}</span> &lt;<span id=\"user-email\">{email}</span>&gt;</p>\
<form id=\"signout\" method=\"post\" action=\"/account/signout\">{csrf_field}\
<button id=\"signout-submit\" type=\"submit\">Sign out</button></form>\
<h2>API keys</h2><table id=\"keys\"><thead><tr><th>Name</th><th>Access</th><th>Databases</th>\
<th>Created</th><th>Last used</th><th></th></tr></thead><tbody>{rows}</tbody></table>\
<h2>Mint a key</h2><form id=\"mint-key\" method=\"post\" action=\"/account/keys\">{csrf_field}\
<label>Name <input type=\"text\" name=\"name\" required></label>{select}\
<fieldset><legend>Databases (none: all)</legend>{boxes}</fieldset>\
<button id=\"mint-submit\" type=\"submit\">Mint key</button></form>\
<h2>Databases</h2><ul id=\"databases\">{dbs}</ul>\
<h2>Change password</h2><form id=\"password\" method=\"post\" action=\"/account/password\">{csrf_field}\
<label>Current password <input type=\"password\" name=\"current_password\" autocomplete=\"current-password\" required></label>\
<label>New password (at least 12 characters) <input type=\"password\" name=\"new_password\" \
autocomplete=\"new-password\" minlength=\"12\" required></label>\
<button id=\"password-submit\" type=\"submit\">Change password</button></form>",
        msgs = messages(error, notice),
        name = esc(&user.name),
        email = esc(&user.email),
        csrf_field = csrf_field(csrf),
        select = access_select(Access::ReadWrite),
        boxes = database_boxes(&databases, &DatabaseScope::All),
    );
    layout("Your account", &main)
}

/// The answer to a mint: the secret, shown this once, and the copy button.
pub fn new_key(created: &CreatedKey) -> String {
    let main = format!(
        "<h1>New key {name}</h1><p id=\"notice\">Copy the key now: it is shown only once.</p>\
<p><code id=\"new-key-secret\">{token}</code></p>\
<p><button id=\"copy-secret\" type=\"button\">Copy</button></p>\
<p><a id=\"back\" href=\"/account\">Back to your account</a></p><script>{COPY_SCRIPT}</script>",
        name = esc(&created.name),
        token = esc(&created.token),
    );
    layout("New key", &main)
}

#[cfg(test)]
mod tests {
    use cluster_protocol::control::accounts::SessionInfo;
    use cluster_protocol::control::{Membership, Role, User};

    use super::*;

    const HOSTILE: &str = "<script>alert(1)</script>\"'&x";

    #[test]
    fn escapes_every_special_character() {
        assert_eq!(
            esc(HOSTILE),
            "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;x"
        );
        assert_eq!(esc("plain"), "plain");
    }

    fn view() -> AccountView {
        AccountView {
            session: SessionInfo {
                user: User {
                    id: "usr_abcdefghijkl".into(),
                    email: format!("{HOSTILE}@example.com"),
                    name: HOSTILE.into(),
                    suspended: false,
                },
                csrf_token: "tok\"en".into(),
            },
            keys: vec![KeyInfo {
                id: "key_abcdefghijkl".into(),
                name: HOSTILE.into(),
                user_id: "usr_abcdefghijkl".into(),
                access: Access::ReadOnly,
                databases: DatabaseScope::Only(vec!["db_<b>".into()]),
                created_at: DateTime::from_timestamp(1_800_000_000, 0).unwrap(),
            }],
            databases: vec![Membership {
                database_id: "db_\"><i>".into(),
                role: Role::Owner,
            }],
        }
    }

    #[test]
    fn a_hostile_name_never_becomes_markup() {
        let page = account(&view(), &[None], Some(HOSTILE), Some(HOSTILE));
        assert!(!page.contains("<script>"), "{page}");
        assert!(!page.contains("<b>") && !page.contains("<i>"));
        assert!(!page.contains("tok\"en"));
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("value=\"tok&quot;en\""));
        assert!(page.contains("<td class=\"key-last-used\">never</td>"));
        assert!(page.contains("<td class=\"key-access\">read_only</td>"));
        assert!(page.contains("<span id=\"user-name\">&lt;script&gt;"));
        for p in [
            signin(HOSTILE, HOSTILE, Some(HOSTILE), None, true),
            signup(HOSTILE, HOSTILE, HOSTILE, Some(HOSTILE)),
            message_page(HOSTILE, HOSTILE),
        ] {
            assert!(!p.contains("<script>") && !p.contains("\"'&x"), "{p}");
        }
        let created = CreatedKey {
            id: "key_abcdefghijkl".into(),
            token: "key_abcdefghijkl.SECRET".into(),
            name: HOSTILE.into(),
            access: Access::ReadWrite,
            databases: DatabaseScope::All,
        };
        let page = new_key(&created);
        // The one script is the copy button's.
        assert_eq!(page.matches("<script>").count(), 1);
        assert!(page.contains("<code id=\"new-key-secret\">key_abcdefghijkl.SECRET</code>"));
    }

    #[test]
    fn pages_read_well_on_a_phone() {
        let page = signin(
            "t",
            "",
            None,
            Some("Password changed; sign in again."),
            false,
        );
        assert!(page
            .contains("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"));
        assert!(page.contains("<p id=\"notice\">Password changed; sign in again.</p>"));
        assert!(!page.contains("signup-link"));
    }

    #[test]
    fn last_used_is_never_or_utc() {
        assert_eq!(last_used_text(None), "never");
        assert_eq!(
            last_used_text(Some(1_800_000_000_000)),
            "2027-01-15 08:00:00 UTC"
        );
    }
}
