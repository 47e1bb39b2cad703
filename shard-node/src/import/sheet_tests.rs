use super::*;

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
    for (name, text) in parts {
        zip.start_file(name, options).unwrap();
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
