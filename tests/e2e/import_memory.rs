//! Issue 27, sections 1 and 2: an import never takes memory from what a
//! file claims or from its number of rows. A 1.6 KB `.xlsx` with cells at
//! A1 and XFD1048576 once made the shard node allocate the whole grid
//! (OOM); an 18 MB CSV of 9 million one-letter lines once raised its peak
//! RSS by 1.4 GB before being refused. Both are refused here, through the
//! router, naming the ceiling, and the shard node holding the database is
//! still up (same pid, answering) with its peak RSS (`VmHWM`) raised by
//! less than [`PEAK_GROWTH_KIB`] (a generous bound: other tests run beside
//! these; the old code went past it by gigabytes).

use e2e_tests::cluster_ops::pid_of;
use e2e_tests::{cluster, Person};

use crate::import::preview;

/// Most the shard node's peak RSS may grow during one of these requests.
const PEAK_GROWTH_KIB: u64 = 128 * 1024;

/// The `shard-<i>` name of the shard holding `db_id`.
async fn shard_of(db_id: &str) -> String {
    cluster()
        .control_plane
        .database(db_id)
        .await
        .expect("placement")
        .shard
}

/// `VmHWM` (peak resident set, KiB) of process `pid`; `None` once it is gone.
fn peak_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Sends `bytes` as a preview and checks the refusal names `expect`, the
/// node is still the same process, answers, and its peak grew within the
/// bound.
async fn refused_in_bounded_memory(filename: &str, bytes: &[u8], expect: &[&str]) {
    let owner = Person::new().await;
    let db_id = &owner.api.new_database("import-memory").await;
    let shard = shard_of(db_id).await;
    let pid = pid_of(&shard);
    let before = peak_kib(pid).expect("the shard node runs");

    let msg = preview(&owner.api, db_id, filename, bytes)
        .await
        .expect_error(400, "bad_request");
    for part in expect {
        assert!(msg.contains(part), "{msg}");
    }

    assert_eq!(pid_of(&shard), pid, "{shard} was restarted");
    let after = peak_kib(pid).unwrap_or_else(|| panic!("{shard} (pid {pid}) died"));
    let reply = preview(&owner.api, db_id, "after.csv", b"a\n1\n").await;
    assert_eq!(reply.expect_ok()["rowCount"], 1, "{shard} still answers");
    assert!(
        after - before < PEAK_GROWTH_KIB,
        "{shard}'s peak RSS grew from {before} KiB to {after} KiB"
    );
}

#[tokio::test]
async fn a_sheet_spanning_the_whole_grid_is_refused_and_the_shard_lives() {
    let sheet = r#"<row r="1"><c r="A1" t="inlineStr"><is><t>a</t></is></c></row><row r="1048576"><c r="XFD1048576"><v>1</v></c></row>"#;
    let file = minimal_xlsx(sheet);
    assert!(file.len() < 2048, "a small file: {} bytes", file.len());
    refused_in_bounded_memory("grid.xlsx", &file, &["XFD1048576", "beyond row 50,001"]).await;
}

#[tokio::test]
async fn a_tall_csv_is_refused_at_the_row_ceiling_and_the_shard_lives() {
    let tall = "a\n".repeat(9_000_000);
    refused_in_bounded_memory("tall.csv", tall.as_bytes(), &["at most 50,000"]).await;
}

/// A minimal `.xlsx` (package and workbook relationships, workbook, one
/// worksheet) whose sheet data is `sheet_data`.
pub(crate) fn minimal_xlsx(sheet_data: &str) -> Vec<u8> {
    use std::io::Write;
    const RELS: &str = "http://schemas.openxmlformats.org/package/2006/relationships";
    const DOC: &str = "http://schemas.openxmlformats.org/officeDocument/2006/relationships";
    const MAIN: &str = "http://schemas.openxmlformats.org/spreadsheetml/2006/main";
    let parts = [
        (
            "_rels/.rels",
            format!(
                r#"<Relationships xmlns="{RELS}"><Relationship Id="rId1" Type="{DOC}/officeDocument" Target="xl/workbook.xml"/></Relationships>"#
            ),
        ),
        (
            "xl/workbook.xml",
            format!(
                r#"<workbook xmlns="{MAIN}" xmlns:r="{DOC}"><sheets><sheet name="S" sheetId="1" r:id="rId1"/></sheets></workbook>"#
            ),
        ),
        (
            "xl/_rels/workbook.xml.rels",
            format!(
                r#"<Relationships xmlns="{RELS}"><Relationship Id="rId1" Type="{DOC}/worksheet" Target="worksheets/sheet1.xml"/></Relationships>"#
            ),
        ),
        (
            "xl/worksheets/sheet1.xml",
            format!(r#"<worksheet xmlns="{MAIN}"><sheetData>{sheet_data}</sheetData></worksheet>"#),
        ),
    ];
    let mut out = std::io::Cursor::new(Vec::new());
    let mut zip = zip::ZipWriter::new(&mut out);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, text) in parts {
        zip.start_file(name, options).expect("zip entry");
        zip.write_all(text.as_bytes()).expect("zip write");
    }
    zip.finish().expect("zip finish");
    out.into_inner()
}
