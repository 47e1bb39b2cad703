use super::*;
use crate::import::sheet_cells::{cell_name, column_letters};

fn message(e: ApiError) -> String {
    match e {
        ApiError::BadRequest(m) => m,
        other => panic!("not a 400: {other:?}"),
    }
}

fn read(filename: &str, bytes: &[u8]) -> ApiResult<(Vec<String>, Vec<Vec<String>>)> {
    let mut sheet = open(filename, bytes.to_vec())?;
    let mut rows = Vec::new();
    sheet.for_each_row(|_, row| {
        rows.push(row.to_vec());
        Ok(())
    })?;
    Ok((sheet.headers, rows))
}

fn read_csv(bytes: &[u8]) -> ApiResult<(Vec<String>, Vec<Vec<String>>)> {
    read("t.csv", bytes)
}

/// A minimal `.xlsx` whose first sheet's `<sheetData>` is `cells`.
pub fn xlsx_of(sheet_data: &str) -> Vec<u8> {
    xlsx_with(sheet_data, &[])
}

/// [`xlsx_of`] with `extra` parts.
pub fn xlsx_with(sheet_data: &str, extra: &[(&str, String)]) -> Vec<u8> {
    use std::io::Write;
    let parts = [
        (
            "_rels/.rels",
            r#"<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>"#.to_owned(),
        ),
        (
            "xl/workbook.xml",
            r#"<?xml version="1.0"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="S" sheetId="1" r:id="rId1"/></sheets></workbook>"#.to_owned(),
        ),
        (
            "xl/_rels/workbook.xml.rels",
            r#"<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>"#.to_owned(),
        ),
        (
            "xl/worksheets/sheet1.xml",
            format!(
                r#"<?xml version="1.0"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>{sheet_data}</sheetData></worksheet>"#
            ),
        ),
    ];
    let mut out = std::io::Cursor::new(Vec::new());
    let mut zip = zip::ZipWriter::new(&mut out);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, text) in parts.iter().chain(extra) {
        zip.start_file(*name, options).unwrap();
        zip.write_all(text.as_bytes()).unwrap();
    }
    zip.finish().unwrap();
    out.into_inner()
}

fn inline(cell: &str, text: &str) -> String {
    format!(r#"<c r="{cell}" t="inlineStr"><is><t>{text}</t></is></c>"#)
}

#[test]
fn bom_is_dropped_and_short_rows_padded() {
    let (h, rows) = read_csv(b"\xEF\xBB\xBFa,b,c\n1,2\n\n3,4,5\n").unwrap();
    assert_eq!(h, ["a", "b", "c"]);
    assert_eq!(rows, [vec!["1", "2", ""], vec!["3", "4", "5"]]);
}

#[test]
fn invalid_utf8_is_read_as_windows_1252() {
    let (_, rows) = read_csv(b"name\ncaf\xE9\n").unwrap();
    assert_eq!(rows[0][0], "café");
}

#[test]
fn quoted_cells_keep_commas_quotes_and_line_breaks() {
    let (_, rows) = read_csv(b"a,b\n\"x, \"\"y\"\"\",\"two\nlines\"\r\n").unwrap();
    assert_eq!(rows, [vec!["x, \"y\"", "two\nlines"]]);
}

#[test]
fn long_rows_empty_files_and_missing_headers_are_refused() {
    let m = message(read_csv(b"a,b\n1,2,3\n").unwrap_err());
    assert!(m.contains("Data row 1 has 3 cells"), "{m}");
    assert_eq!(
        message(read("x.csv", b"").unwrap_err()),
        "The file is empty."
    );
    assert!(message(read_csv(b"\n,,\n").unwrap_err()).contains("no header row"));
}

#[test]
fn row_ceiling_is_refused_naming_it() {
    let mut csv = String::from("n\n");
    for i in 0..=MAX_ROWS {
        csv.push_str(&format!("{i}\n"));
    }
    let m = message(read_csv(csv.as_bytes()).unwrap_err());
    assert!(m.contains("at most 50,000"), "{m}");
    let exact: String = csv
        .lines()
        .take(MAX_ROWS + 1)
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(read_csv(exact.as_bytes()).unwrap().1.len(), MAX_ROWS);
}

#[test]
fn the_row_ceiling_stops_the_pass_at_once() {
    // 9 million one-letter lines: refused at row 50,001 whatever follows.
    let tall = "a\n".repeat(9_000_000);
    let mut sheet = open("tall.csv", tall.into_bytes()).unwrap();
    let mut seen = 0;
    let m = message(
        sheet
            .for_each_row(|_, _| {
                seen += 1;
                Ok(())
            })
            .unwrap_err(),
    );
    assert!(m.contains("at most 50,000"), "{m}");
    assert_eq!(seen, MAX_ROWS);
}

#[test]
fn column_ceiling_is_refused_before_the_cells_are_kept() {
    let wide = ",".repeat(2_000_000);
    let m = message(read_csv(format!("h{wide}\n").as_bytes()).unwrap_err());
    assert!(m.contains("more than 501 cells"), "{m}");
    let header: Vec<String> = (0..=MAX_COLUMNS).map(|i| format!("c{i}")).collect();
    let m = message(read_csv(header.join(",").as_bytes()).unwrap_err());
    assert!(m.contains("header row has 501 cells"), "{m}");
    let header: Vec<String> = (0..MAX_COLUMNS).map(|i| format!("c{i}")).collect();
    assert_eq!(read_csv(header.join(",").as_bytes()).unwrap().0.len(), 500);
    let long = "h".repeat(MAX_HEADER_CHARS + 1);
    let m = message(read_csv(long.as_bytes()).unwrap_err());
    assert!(m.contains("longer than 1000 characters"), "{m}");
}

#[test]
fn cells_are_named_as_spreadsheets_name_them() {
    assert_eq!(cell_name(0, 0), "A1");
    assert_eq!(cell_name(1_048_575, 16_383), "XFD1048576");
    assert_eq!(column_letters(25), "Z");
    assert_eq!(column_letters(26), "AA");
    assert_eq!(column_letters(499), "SF");
}

#[test]
fn an_xlsx_is_read_as_a_stream_of_rows() {
    let data = format!(
        r#"<row r="1">{}{}</row><row r="2">{}<c r="B2"><v>3</v></c></row><row r="4"><c r="B4"><v>2.5</v></c></row>"#,
        inline("A1", "Item"),
        inline("B1", "Qty"),
        inline("A2", "Pen"),
    );
    let (h, rows) = read("a.xlsx", &xlsx_of(&data)).unwrap();
    assert_eq!(h, ["Item", "Qty"]);
    assert_eq!(rows, [vec!["Pen", "3"], vec!["", "2.5"]]);
}

#[test]
fn an_xlsx_cell_beyond_the_ceilings_is_refused_naming_it() {
    // The 1.6 KB file that once made calamine allocate the whole sheet.
    let far = format!(
        r#"<row r="1">{}</row><row r="1048576"><c r="XFD1048576"><v>1</v></c></row>"#,
        inline("A1", "a")
    );
    let m = message(read("far.xlsx", &xlsx_of(&far)).unwrap_err());
    assert!(m.contains("cell XFD1048576, beyond row 50,001"), "{m}");
    let wide = format!(r#"<row r="1">{}</row>"#, inline("SG1", "x"));
    let m = message(read("wide.xlsx", &xlsx_of(&wide)).unwrap_err());
    assert!(m.contains("cell SG1, beyond column SF (500)"), "{m}");
    let back = format!(
        r#"<row r="3">{}</row><row r="2">{}</row>"#,
        inline("A3", "a"),
        inline("A2", "b")
    );
    let m = message(read("back.xlsx", &xlsx_of(&back)).unwrap_err());
    assert!(m.contains("cell A2 after row 3"), "{m}");
}

#[test]
fn a_fake_xlsx_is_refused() {
    let m = message(read("data.XLSX", b"not a zip at all").unwrap_err());
    assert!(m.contains("could not be read as an .xlsx"), "{m}");
    let m = message(read("data.xls", b"not a compound file").unwrap_err());
    assert!(m.contains("could not be read as an .xls"), "{m}");
}

#[test]
fn what_calamine_reads_whole_is_bounded_before_it_opens_the_file() {
    let a1 = format!(r#"<row r="1">{}</row>"#, inline("A1", "a"));
    // A shared-strings part claiming a trillion strings in a few bytes.
    let claim = r#"<sst uniqueCount="1000000000000"><si><t>x</t></si></sst>"#.to_owned();
    let file = xlsx_with(&a1, &[("xl/sharedStrings.xml", claim)]);
    let m = message(read("claim.xlsx", &file).unwrap_err());
    assert!(m.contains("claim 1000000000000 strings"), "{m}");
    let honest = r#"<sst uniqueCount="1"><si><t>x</t></si></sst>"#.to_owned();
    let file = xlsx_with(&a1, &[("xl/sharedStrings.xml", honest)]);
    assert_eq!(read("honest.xlsx", &file).unwrap().0, ["a"]);
    // A styles part past its cap, however well it compresses.
    let styles = format!("<styleSheet>{}</styleSheet>", " ".repeat(3 * 1024 * 1024));
    let file = xlsx_with(&a1, &[("xl/styles.xml", styles)]);
    let m = message(read("styles.xlsx", &file).unwrap_err());
    assert!(m.contains("styles would inflate to"), "{m}");
}

/// A BIFF8 record.
fn record(typ: u16, data: &[u8]) -> Vec<u8> {
    let mut out = typ.to_le_bytes().to_vec();
    out.extend((data.len() as u16).to_le_bytes());
    out.extend(data);
    out
}

/// An `.xls` whose sheets hold numbers at the given `(row, col)` cells.
fn xls_of(sheets: &[&[(u16, u16)]]) -> Vec<u8> {
    use std::io::Write;
    let bof = |dt: u16| {
        let mut d = vec![0u8; 16];
        d[0..2].copy_from_slice(&0x0600u16.to_le_bytes());
        d[2..4].copy_from_slice(&dt.to_le_bytes());
        record(0x0809, &d)
    };
    let bound = |pos: u32, i: usize| {
        let name = format!("S{i}");
        let mut d = pos.to_le_bytes().to_vec();
        d.extend([0, 0, name.len() as u8, 0]);
        d.extend(name.as_bytes());
        record(0x0085, &d)
    };
    let eof = record(0x000A, &[]);
    let globals_len = |positions: &[u32]| {
        bof(5).len()
            + positions
                .iter()
                .enumerate()
                .map(|(i, p)| bound(*p, i).len())
                .sum::<usize>()
            + eof.len()
    };
    let bodies: Vec<Vec<u8>> = sheets
        .iter()
        .map(|cells| {
            let mut s = bof(0x10);
            for (row, col) in cells.iter() {
                let mut d = row.to_le_bytes().to_vec();
                d.extend(col.to_le_bytes());
                d.extend(0u16.to_le_bytes());
                d.extend((*row as f64 + 1.0).to_le_bytes());
                s.extend(record(0x0203, &d));
            }
            s.extend(&eof);
            s
        })
        .collect();
    let mut positions = vec![0u32; sheets.len()];
    let mut at = globals_len(&positions) as u32;
    for (p, body) in positions.iter_mut().zip(&bodies) {
        *p = at;
        at += body.len() as u32;
    }
    let mut stream = bof(5);
    for (i, p) in positions.iter().enumerate() {
        stream.extend(bound(*p, i));
    }
    stream.extend(&eof);
    for body in &bodies {
        stream.extend(body);
    }
    let mut file = cfb::CompoundFile::create(std::io::Cursor::new(Vec::new())).unwrap();
    file.create_stream("/Workbook")
        .unwrap()
        .write_all(&stream)
        .unwrap();
    file.flush().unwrap();
    file.into_inner().into_inner()
}

#[test]
fn an_xls_is_walked_before_calamine_builds_its_sheets() {
    let (h, rows) = read("a.xls", &xls_of(&[&[(0, 0), (1, 0)], &[(0, 0)]])).unwrap();
    assert_eq!(
        (h, rows),
        (vec!["1".to_owned()], vec![vec!["2".to_owned()]])
    );
    let m = message(read("far.xls", &xls_of(&[&[(0, 0), (60_000, 0)]])).unwrap_err());
    assert!(m.contains("cell A60001, beyond row 50,001"), "{m}");
    // An ignored sheet still counts: calamine builds every sheet.
    let wide = xls_of(&[&[(0, 0)], &[(0, 0), (9_999, 99)]]);
    let m = message(read("wide.xls", &wide).unwrap_err());
    assert!(m.contains("span more than 400,000 cells"), "{m}");
}
