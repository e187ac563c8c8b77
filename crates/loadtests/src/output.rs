//! Where a run's reports go: `report.json` (written aside and renamed, so a merge never
//! reads half of one), `report.md`, `junit.xml` and `report.html`, in the run's `--out`.

use std::path::Path;

use crate::error::LoadError;
use crate::report::Report;

/// Writes `report.json`, `report.md`, `junit.xml` and `report.html` into `dir`.
pub fn write_all(report: &Report, dir: &Path) -> Result<(), LoadError> {
    std::fs::create_dir_all(dir).map_err(|e| LoadError::io(dir, e))?;
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| LoadError::io(&path, e))
    };
    // Written aside and renamed, so a merge waiting for it never reads half a report.
    let tmp = dir.join(".report.json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(report).unwrap_or_default())
        .map_err(|e| LoadError::io(&tmp, e))?;
    let json = dir.join("report.json");
    std::fs::rename(&tmp, &json).map_err(|e| LoadError::io(&json, e))?;
    write("report.md", report.markdown())?;
    write("junit.xml", report.junit())?;
    write("report.html", crate::report_html::render(report))
}
