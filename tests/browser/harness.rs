//! One headless Chromium per test, driven through its own chromedriver.
//!
//! [`Browser::start`] spawns `/usr/bin/chromedriver` on a free loopback port
//! in a process group of its own, opens a WebDriver session on Debian's
//! `/usr/bin/chromium` with the flags this machine needs (its network is
//! closed: without the background-networking flags Chromium's own
//! connections are refused by the dozen), a fresh profile directory and a
//! download directory of its own. Dropping the [`Browser`] (also while a
//! failed test unwinds) ends the session, terminates chromedriver's whole
//! process group (Chromium and its helpers included) and removes the
//! directories; a failed test keeps them and prints where (chromedriver's log
//! is there).
//!
//! Without Chromium the tests fail when `CI=true` and are skipped with a
//! printed reason elsewhere (`deploy/dev-cluster prereqs` installs the
//! Debian packages `chromium` and `chromium-driver`).

use std::fs::File;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use e2e_tests::{cluster, fresh_address, unique};
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// What Chromium needs on this machine (headless, as root, on a closed
/// network; docs/operations.md "Tests and CI").
const CHROMIUM_FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
];

/// The longest wait for a page element, a download or chromedriver's start.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Records script errors of every page from its first line on (inline
/// scripts included), read back by [`Browser::script_errors`].
const ERROR_RECORDER: &str = "window.__scriptErrors = [];\
    window.addEventListener('error', e => window.__scriptErrors.push(String(e.message)));\
    window.addEventListener('unhandledrejection', e => window.__scriptErrors.push('unhandled rejection: ' + String(e.reason)));";

/// Why the browser tests cannot run here, if they cannot.
fn missing_browser() -> Option<String> {
    [CHROMIUM, CHROMEDRIVER]
        .into_iter()
        .find(|p| !Path::new(p).exists())
        .map(|p| {
            format!(
                "{p} not found: install the Debian packages chromium and chromium-driver \
                 (deploy/dev-cluster prereqs does)"
            )
        })
}

/// A directory under the system's temporary directory, removed on drop
/// unless the thread is panicking (then its path is printed).
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "browser test failed: its profile, downloads and chromedriver log are in {}",
                self.0.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// chromedriver in its own process group; Chromium and its helpers are in
/// the same group, so terminating the group ends them all.
struct Driver {
    child: Child,
    port: u16,
}

impl Driver {
    fn spawn(log: &Path) -> Driver {
        let port = free_port();
        let out = File::create(log).expect("chromedriver log file");
        let err = out.try_clone().expect("chromedriver log file");
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("{CHROMEDRIVER} did not start: {e}"));
        Driver { child, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Waits until chromedriver answers `/status` ready.
    async fn ready(&mut self) {
        let http = reqwest::Client::new();
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("chromedriver exited during start-up: {status}");
            }
            let ready = match http.get(format!("{}/status", self.url())).send().await {
                Ok(r) => r
                    .json::<Value>()
                    .await
                    .ok()
                    .is_some_and(|v| v["value"]["ready"] == true),
                Err(_) => false,
            };
            if ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver not ready after {PATIENCE:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Whether any process of the group is left (chromedriver reaped first).
    fn group_alive(&mut self) -> bool {
        let _ = self.child.try_wait();
        signal_group(self.child.id(), "0")
    }
}

/// `kill -s SIGNAL -- -PGID`: true when the signal was delivered.
fn signal_group(pgid: u32, signal: &str) -> bool {
    Command::new("kill")
        .args(["-s", signal, "--", &format!("-{pgid}")])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl Drop for Driver {
    fn drop(&mut self) {
        let pgid = self.child.id();
        signal_group(pgid, "TERM");
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.group_alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if self.group_alive() {
            signal_group(pgid, "KILL");
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    listener.local_addr().expect("its address").port()
}

/// A Chrome DevTools Protocol command sent through chromedriver
/// (`POST /session/{id}/goog/cdp/execute`).
#[derive(Debug)]
struct Cdp {
    cmd: &'static str,
    params: Value,
}

impl WebDriverCompatibleCommand for Cdp {
    fn endpoint(
        &self,
        base: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!(
            "session/{}/goog/cdp/execute",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        let body = json!({ "cmd": self.cmd, "params": self.params });
        (http::Method::POST, Some(body.to_string()))
    }
}

/// A headless Chromium with its own profile, downloads and client address.
pub struct Browser {
    // Field order is drop order: the session, then chromedriver, then the files.
    pub client: Client,
    driver: Driver,
    scratch: Scratch,
    pub downloads: PathBuf,
    /// The router, e.g. `http://127.0.0.1:25080`.
    pub base: String,
    /// The `x-forwarded-for` every request of this browser carries, so the
    /// router's per-address sign-in limit counts this test alone.
    pub address: String,
}

impl Browser {
    /// A fresh browser; `None` (test skipped, reason printed) when Chromium
    /// is not installed outside CI. In CI (`CI=true`) that is a failure.
    pub async fn start() -> Option<Browser> {
        if let Some(reason) = missing_browser() {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{reason}");
            }
            eprintln!("browser test skipped: {reason}");
            return None;
        }
        let dir = std::env::temp_dir().join(unique("tabula-browser"));
        let profile = dir.join("profile");
        let downloads = dir.join("downloads");
        std::fs::create_dir_all(&profile).expect("profile directory");
        std::fs::create_dir_all(&downloads).expect("download directory");
        let scratch = Scratch(dir.clone());
        let mut driver = Driver::spawn(&dir.join("chromedriver.log"));
        driver.ready().await;

        let mut args: Vec<String> = CHROMIUM_FLAGS.iter().map(|s| s.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": args,
                "prefs": {
                    "download.default_directory": downloads.display().to_string(),
                    "download.prompt_for_download": false,
                },
            },
        });
        let Value::Object(caps) = caps else {
            unreachable!()
        };
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&driver.url())
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "no WebDriver session (see {}/chromedriver.log): {e}",
                    dir.display()
                )
            });
        let browser = Browser {
            client,
            driver,
            scratch,
            downloads,
            base: cluster().router_url.clone(),
            address: fresh_address(),
        };
        browser
            .cdp(
                "Page.addScriptToEvaluateOnNewDocument",
                json!({ "source": ERROR_RECORDER }),
            )
            .await;
        browser.cdp("Network.enable", json!({})).await;
        browser
            .cdp(
                "Network.setExtraHTTPHeaders",
                json!({ "headers": { "X-Forwarded-For": browser.address } }),
            )
            .await;
        Some(browser)
    }

    /// Sends a DevTools command; panics on an error answer.
    pub async fn cdp(&self, cmd: &'static str, params: Value) -> Value {
        self.client
            .issue_cmd(Cdp { cmd, params })
            .await
            .unwrap_or_else(|e| panic!("CDP {cmd}: {e}"))
    }

    /// Ends the session and chromedriver (dropping does the same).
    pub async fn close(self) {
        let Browser {
            client,
            driver,
            scratch,
            ..
        } = self;
        let _ = client.close().await;
        drop(driver);
        drop(scratch);
    }

    /// Opens `path` on the router (or an absolute URL).
    pub async fn goto(&self, path: &str) {
        let url = if path.starts_with("http") {
            path.to_string()
        } else {
            format!("{}{path}", self.base)
        };
        self.client
            .goto(&url)
            .await
            .unwrap_or_else(|e| panic!("open {url}: {e}"));
    }

    pub async fn url(&self) -> url::Url {
        self.client.current_url().await.expect("current URL")
    }

    pub async fn path(&self) -> String {
        self.url().await.path().to_string()
    }

    /// The HTTP status of the page now shown (Navigation Timing's
    /// `responseStatus`: after a redirect, the final answer's).
    pub async fn status(&self) -> u16 {
        let v = self
            .script("return performance.getEntriesByType('navigation')[0].responseStatus;")
            .await;
        v.as_u64()
            .unwrap_or_else(|| panic!("no response status: {v}")) as u16
    }

    pub async fn script(&self, js: &str) -> Value {
        self.client
            .execute(js, vec![])
            .await
            .unwrap_or_else(|e| panic!("script {js}: {e}"))
    }

    /// Waits for an element matching `css` (pages are loaded by then, but a
    /// click's navigation may still be on its way).
    pub async fn wait_for(&self, css: &str) -> fantoccini::elements::Element {
        match self
            .client
            .wait()
            .at_most(PATIENCE)
            .for_element(Locator::Css(css))
            .await
        {
            Ok(element) => element,
            Err(e) => panic!("no element {css} on {}: {e}", self.describe().await),
        }
    }

    pub async fn find_all(&self, css: &str) -> Vec<fantoccini::elements::Element> {
        self.client
            .find_all(Locator::Css(css))
            .await
            .expect("find elements")
    }

    pub async fn text(&self, css: &str) -> String {
        self.wait_for(css).await.text().await.expect("element text")
    }

    /// Waits until the page's path is `path` (a click's navigation done).
    pub async fn wait_for_path(&self, path: &str) {
        let deadline = Instant::now() + PATIENCE;
        while self.path().await != path {
            assert!(
                Instant::now() < deadline,
                "never reached {path}: {}",
                self.describe().await
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Types into the named text inputs of `form`.
    pub async fn fill(&self, form: &str, fields: &[(&str, &str)]) {
        for (name, value) in fields {
            let input = self
                .wait_for(&format!("{form} input[name=\"{name}\"]"))
                .await;
            input.clear().await.expect("clear input");
            input.send_keys(value).await.expect("type into input");
        }
    }

    /// Fills the named inputs of `form` and clicks `button`.
    pub async fn submit(&self, form: &str, fields: &[(&str, &str)], button: &str) {
        self.fill(form, fields).await;
        self.click_to_leave(button).await;
    }

    /// Clicks `button`, which posts its form, and waits for the answer's
    /// page. A mark on the page we leave tells the two apart: the answer's
    /// page has none, so its status and text are read, not the old page's
    /// (a form of /account posts and lands on /account: the path alone
    /// would not tell them apart).
    pub async fn click_to_leave(&self, button: &str) {
        self.script("window.__leaving = true; return null;").await;
        self.wait_for(button).await.click().await.expect("click");
        self.wait_for_new_page().await;
    }

    /// Waits until the page marked by [`Browser::click_to_leave`] is replaced and
    /// the new one has loaded.
    async fn wait_for_new_page(&self) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let state = self
                .script("return window.__leaving === true ? 'old' : document.readyState;")
                .await;
            if state.as_str() == Some("complete") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the form's answer never loaded: {}",
                self.describe().await
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The script errors recorded on the current page.
    pub async fn script_errors(&self) -> Vec<String> {
        let v = self.script("return window.__scriptErrors || null;").await;
        let Some(list) = v.as_array() else {
            panic!(
                "the error recorder did not run on {}",
                self.describe().await
            )
        };
        list.iter()
            .map(|e| e.as_str().unwrap_or_default().to_string())
            .collect()
    }

    pub async fn assert_no_script_errors(&self) {
        let errors = self.script_errors().await;
        assert!(
            errors.is_empty(),
            "script errors on {}: {errors:?}",
            self.path().await
        );
    }

    /// The URL and the start of the page's text, for failure messages.
    pub async fn describe(&self) -> String {
        let url = self
            .client
            .current_url()
            .await
            .map(|u| u.to_string())
            .unwrap_or_default();
        let text = match self.client.find(Locator::Css("body")).await {
            Ok(body) => body.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        let text: String = text.chars().take(600).collect();
        format!("{url} (page text: {text:?})")
    }

    /// Waits for one finished download and returns its path: Chromium
    /// writes into a hidden `.org.chromium.Chromium.*` file, then a
    /// `.crdownload`, and renames it when the body has all arrived.
    pub async fn downloaded_file(&self) -> PathBuf {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let files = self.download_names();
            let done: Vec<_> = files
                .iter()
                .filter(|n| !n.ends_with(".crdownload") && !n.starts_with('.'))
                .collect();
            if files.len() == 1 && done.len() == 1 {
                return self.downloads.join(done[0]);
            }
            assert!(done.len() <= 1, "more than one download: {files:?}");
            assert!(
                Instant::now() < deadline,
                "no finished download after {PATIENCE:?}: {files:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The names in the download directory now.
    pub fn download_names(&self) -> Vec<String> {
        std::fs::read_dir(&self.downloads)
            .expect("download directory")
            .map(|e| {
                e.expect("directory entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect()
    }

    pub fn scratch_dir(&self) -> &Path {
        &self.scratch.0
    }

    pub fn driver_port(&self) -> u16 {
        self.driver.port
    }
}

/// Skips the test (returns) when [`Browser::start`] says so.
#[macro_export]
macro_rules! browser {
    () => {
        match $crate::harness::Browser::start().await {
            Some(b) => b,
            None => return,
        }
    };
}
