//! `/pins` on the admin listener (docs/pins.md): the pins and pending drifts of every
//! pinned upstream (`GET /pins`), the drifts with the digest an approval names
//! (`GET /pins/diff`), an approval of exactly those drifts (`POST /pins/approve`) and a
//! reset of all an upstream's pins or of those of one name (`POST /pins/reset`).
//! Arguments are query parameters: `upstream`, `name`, `digest`.

use http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::pins::book::{ApproveError, PinBook, PinRegistry};

/// What `/pins…` answers: a status and a JSON body.
pub(super) async fn answer(
    pins: &PinRegistry,
    method: &Method,
    path: &str,
    query: Option<&str>,
) -> (StatusCode, Value) {
    let args = Args::parse(query);
    let chosen: Vec<&std::sync::Arc<PinBook>> = pins
        .books()
        .filter(|b| args.upstream.as_deref().is_none_or(|u| b.upstream() == u))
        .collect();
    if let Some(upstream) = &args.upstream
        && chosen.is_empty()
    {
        return error(StatusCode::NOT_FOUND, format!("no pinned upstream named {upstream}"));
    }
    match (path, method) {
        ("/pins", &Method::GET) => (
            StatusCode::OK,
            json!({"upstreams": chosen.iter().map(|b| b.list()).collect::<Vec<_>>()}),
        ),
        ("/pins/diff", &Method::GET) => (
            StatusCode::OK,
            json!({"upstreams": chosen.iter().map(|b| b.diff(args.name.as_deref())).collect::<Vec<_>>()}),
        ),
        ("/pins/approve", &Method::POST) => approve(&chosen, &args).await,
        ("/pins/reset", &Method::POST) => reset(&chosen, &args).await,
        ("/pins" | "/pins/diff", _) => error(StatusCode::METHOD_NOT_ALLOWED, "use GET".into()),
        ("/pins/approve" | "/pins/reset", _) => error(StatusCode::METHOD_NOT_ALLOWED, "use POST".into()),
        _ => error(
            StatusCode::NOT_FOUND,
            "try GET /pins, GET /pins/diff, POST /pins/approve or POST /pins/reset".into(),
        ),
    }
}

/// The query's arguments.
#[derive(Default)]
struct Args {
    upstream: Option<String>,
    name: Option<String>,
    digest: Option<String>,
}

impl Args {
    fn parse(query: Option<&str>) -> Args {
        let mut args = Args::default();
        for (key, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            let slot = match key.as_ref() {
                "upstream" => &mut args.upstream,
                "name" => &mut args.name,
                "digest" => &mut args.digest,
                _ => continue,
            };
            *slot = Some(value.into_owned());
        }
        args
    }
}

async fn approve(chosen: &[&std::sync::Arc<PinBook>], args: &Args) -> (StatusCode, Value) {
    let ([book], Some(digest)) = (chosen, &args.digest) else {
        return error(
            StatusCode::BAD_REQUEST,
            "approve names one upstream and the digest diff showed: ?upstream=NAME&digest=sha256:…".into(),
        );
    };
    match book.approve(args.name.as_deref(), digest).await {
        Ok(approved) => (
            StatusCode::OK,
            json!({"upstream": book.upstream(), "approved": approved}),
        ),
        Err(ApproveError::NothingPending) => error(StatusCode::NOT_FOUND, "nothing pending to approve".into()),
        Err(stale @ ApproveError::Stale { .. }) => error(StatusCode::CONFLICT, stale.to_string()),
        Err(ApproveError::Store(store)) => error(StatusCode::INTERNAL_SERVER_ERROR, store.to_string()),
    }
}

async fn reset(chosen: &[&std::sync::Arc<PinBook>], args: &Args) -> (StatusCode, Value) {
    let [book] = chosen else {
        return error(
            StatusCode::BAD_REQUEST,
            "reset names one upstream (?upstream=NAME) and forgets all its pins, or those named &name=NAME".into(),
        );
    };
    match (book.reset(args.name.as_deref()).await, &args.name) {
        (Ok(0), Some(name)) => error(
            StatusCode::NOT_FOUND,
            format!("no pin nor pending drift named {name} for upstream {}", book.upstream()),
        ),
        (Ok(forgotten), name) => (
            StatusCode::OK,
            json!({"upstream": book.upstream(), "reset": true, "name": name, "forgotten": forgotten}),
        ),
        (Err(store), _) => error(StatusCode::INTERNAL_SERVER_ERROR, store.to_string()),
    }
}

fn error(status: StatusCode, message: String) -> (StatusCode, Value) {
    (status, json!({"error": message}))
}
