//! Another web site for the forgery tests: a tiny HTTP server on a loopback
//! port of its own that answers every request with one HTML page. The router
//! is at `http://127.0.0.1:ROUTER_PORT`, so this server is another site when
//! named `localhost` (Chromium sends `Sec-Fetch-Site: cross-site` from it)
//! and the same site but another origin when named `127.0.0.1`
//! (`Sec-Fetch-Site: same-site`, and a `SameSite=Lax` cookie goes along
//! even with a POST).

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub struct Site {
    port: u16,
    task: JoinHandle<()>,
}

impl Site {
    /// Serves `html` until dropped.
    pub async fn serve(html: String) -> Site {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let port = listener.local_addr().expect("its address").port();
        let task = tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let html = html.clone();
                tokio::spawn(async move {
                    // The request head (its body, if any, is not read).
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
                        match conn.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\n\
                         content-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n{html}",
                        html.len()
                    );
                    let _ = conn.write_all(answer.as_bytes()).await;
                    let _ = conn.shutdown().await;
                });
            }
        });
        Site { port, task }
    }

    /// The page as another site (`localhost` against the router's `127.0.0.1`).
    pub fn cross_site(&self) -> String {
        format!("http://localhost:{}/", self.port)
    }

    /// The page on the router's site but another origin (another port).
    pub fn same_site(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A page that submits a POST form to `action` as soon as it loads.
pub fn auto_post(action: &str, fields: &[(&str, &str)]) -> String {
    let inputs: String = fields
        .iter()
        .map(|(n, v)| format!("<input type=\"hidden\" name=\"{n}\" value=\"{v}\">"))
        .collect();
    format!(
        "<!doctype html><html><body><form id=\"forged\" method=\"post\" action=\"{action}\">{inputs}</form>\
         <script>document.getElementById('forged').submit();</script></body></html>"
    )
}

/// A page with one link, `a#go`, to `href`.
pub fn link(href: &str) -> String {
    format!("<!doctype html><html><body><a id=\"go\" href=\"{href}\">export</a></body></html>")
}
