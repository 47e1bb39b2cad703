//! An import file over the 20 MB an import reads, sent the way the router
//! sends it: streamed, the whole body written before the answer is read.
//! The node reads the rest of the form and drops it before its 400, so the
//! writer finishes and reads the refusal instead of a reset connection.

use std::time::Duration;

use cluster_protocol::principal::STREAMED_BODY;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

use crate::helpers::*;

/// Bounds every wait, so a regression fails instead of hanging.
const PATIENCE: Duration = Duration::from_secs(60);
const MIB: usize = 1024 * 1024;
const BOUNDARY: &str = "shard-import-boundary-7d21";

#[tokio::test]
async fn a_file_over_the_import_limit_is_refused_after_the_whole_form_is_read() {
    let app = spawn_app().await;
    let (db, p) = app.owned_database().await;
    let path = format!("/api/databases/{db}/import");

    // 21.5 MiB of CSV, then a second part after it, under the 22 MiB the
    // router lets through for an import.
    let mut body = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.csv\"\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(b"a,b\n");
    let row = format!("1,{}\n", "x".repeat(1021));
    while body.len() < 21 * MIB + MIB / 2 {
        body.extend_from_slice(row.as_bytes());
    }
    body.extend_from_slice(
        format!("\r\n--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"target\"\r\n\r\n{{}}\r\n--{BOUNDARY}--\r\n")
            .as_bytes(),
    );

    let head = signed_head(
        "POST",
        &path,
        &p,
        STREAMED_BODY,
        &format!(
            "connection: close\r\ncontent-type: multipart/form-data; boundary={BOUNDARY}\r\ncontent-length: {}\r\n",
            body.len()
        ),
    );

    // A small send buffer: the part after the limit cannot sit in the
    // sockets' buffers, it is written only as fast as the node reads it.
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_send_buffer_size(16 * 1024).unwrap();
    let mut s = socket.connect(app.addr).await.unwrap();
    let write = async {
        s.write_all(head.as_bytes()).await?;
        s.write_all(&body).await
    };
    tokio::time::timeout(PATIENCE, write)
        .await
        .expect("the body written within the test's patience")
        .expect("the whole body is written: the node reads the form to its end");
    let mut answer = Vec::new();
    tokio::time::timeout(PATIENCE, s.read_to_end(&mut answer))
        .await
        .expect("the answer within the test's patience")
        .expect("the answer is read, not a reset connection");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(
        answer.contains("The file is larger than the 20 MB an import reads."),
        "{answer}"
    );
}
