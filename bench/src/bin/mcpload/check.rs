//! A target and how a run measured against it (one row of RESULTS.md's targets table), and
//! the "min / **median** / max" cell format; shared by the report and the nginx floor checks.

/// One row of the targets table.
pub(crate) struct Check {
    pub(crate) what: String,
    pub(crate) goal: String,
    pub(crate) measured: String,
    pub(crate) met: Option<bool>,
    pub(crate) why: String,
}

/// "min / **median** / max" with `decimals` digits, or "–".
pub(crate) fn fmt3(value: Option<(f64, f64, f64)>, decimals: usize) -> String {
    value.map_or("–".to_owned(), |(a, b, c)| {
        format!("{a:.decimals$} / **{b:.decimals$}** / {c:.decimals$}")
    })
}
