//! Exports by session cookie: the account page's link downloads the zip;
//! the same link followed from another site is refused (the shard node's
//! `Sec-Fetch-Site` check, 403), and nothing is downloaded.

use std::io::Read;

use e2e_tests::{id, unique, Api};
use serde_json::Value;

use crate::harness::Browser;
use crate::site::{self, Site};
use crate::{browser, mint_key, sign_up};

/// A database with one table, made through the API with a key minted on
/// the page; returns (database id, table name).
async fn database_of(b: &Browser) -> (String, String) {
    let secret = mint_key(b, "exports", "read_write").await;
    let api = Api::with_token(&secret);
    let database = api.create_database(&unique("browser export")).await;
    let table = unique("Tasks");
    api.create_table(&id(&database), &table).await;
    (id(&database), table)
}

/// The JSON the browser shows (Chromium wraps a JSON answer in a `<pre>`).
async fn shown_json(b: &Browser) -> Value {
    let text = b
        .script("const pre = document.querySelector('pre'); return pre ? pre.textContent : document.body.innerText;")
        .await;
    let text = text.as_str().unwrap_or_default();
    match serde_json::from_str(text) {
        Ok(v) => v,
        Err(_) => panic!("not JSON: {}", b.describe().await),
    }
}

#[tokio::test]
async fn the_export_link_downloads_the_zip_by_cookie() {
    let b = browser!();
    sign_up(&b).await;
    let (database, table) = database_of(&b).await;
    b.goto("/account").await;
    let item = format!("ul#databases li[data-database-id=\"{database}\"]");
    let link = b.wait_for(&format!("{item} a.export")).await;
    assert_eq!(
        link.attr("href").await.unwrap().as_deref(),
        Some(format!("/api/databases/{database}/export").as_str())
    );
    link.click().await.unwrap();
    let file = b.downloaded_file().await;
    let bytes = std::fs::read(&file).unwrap();
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .unwrap_or_else(|e| panic!("{} is not a zip: {e}", file.display()));
    let names: Vec<String> = (0..zip.len())
        .map(|i| zip.by_index(i).unwrap().name().unwrap().to_string())
        .collect();
    assert!(
        names.contains(&"manifest.json".to_string()),
        "entries: {names:?}"
    );
    assert!(
        names.contains(&format!("{table}.csv")),
        "entries: {names:?}"
    );
    let mut manifest = String::new();
    zip.by_name("manifest.json")
        .unwrap()
        .read_to_string(&mut manifest)
        .unwrap();
    let manifest: Value = serde_json::from_str(&manifest).unwrap();
    assert!(
        manifest.to_string().contains(&database),
        "manifest: {manifest}"
    );
    // Still on the account page: a download does not navigate.
    assert_eq!(b.path().await, "/account");
    b.close().await;
}

/// Follows a link to the export from `page_url` (another site or another
/// origin of the router's site) and checks the refusal.
async fn refused_from(b: &Browser, page_url: &str, database: &str) {
    b.goto(page_url).await;
    b.wait_for("a#go").await.click().await.unwrap();
    b.wait_for_path(&format!("/api/databases/{database}/export"))
        .await;
    assert_eq!(b.status().await, 403, "{}", b.describe().await);
    let body = shown_json(b).await;
    assert_eq!(body["error"]["code"], "forbidden", "{body}");
    assert_eq!(
        body["error"]["message"],
        "Exports cannot be requested from another site; open the export link directly.",
        "{body}"
    );
    assert!(
        b.download_names().is_empty(),
        "downloaded: {:?}",
        b.download_names()
    );
}

#[tokio::test]
async fn an_export_link_on_another_site_is_refused() {
    let b = browser!();
    sign_up(&b).await;
    let (database, _) = database_of(&b).await;
    let export = format!("{}/api/databases/{database}/export", b.base);
    let site = Site::serve(site::link(&export)).await;
    // localhost is another site than 127.0.0.1: Sec-Fetch-Site cross-site
    // (a top-level GET, so the Lax cookie goes along).
    refused_from(&b, &site.cross_site(), &database).await;
    // Another port of 127.0.0.1: the same site, another origin.
    refused_from(&b, &site.same_site(), &database).await;
    // Typed into the address bar (Sec-Fetch-Site none) it downloads.
    b.goto(&export).await;
    let file = b.downloaded_file().await;
    zip::ZipArchive::new(std::fs::File::open(&file).unwrap()).expect("a zip");
    b.close().await;
}
