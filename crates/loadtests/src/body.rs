//! Every answer the load generator reads from the network is read with a cap: a target
//! (or a probe, or an admin route) that answers an endless or gigabyte body costs at most
//! the cap, never the process. What is over the cap is not read; the caller says so.

/// The most of a target's answer (a checkout step, a fulfilment probe) that is read.
pub const MAX_ANSWER_BYTES: usize = 1 << 20;
/// The most of an admin answer that is read (the delivery log holds up to 16,384 entries).
pub const MAX_ADMIN_BYTES: usize = 64 << 20;

/// `resp`'s body, or `None` when it is longer than `cap` bytes (the rest is left unread
/// and the connection dropped with it). http-body-util's `Limited` counts, as the
/// provider's webhook client and the merchants' gateway do.
pub async fn read_capped(resp: reqwest::Response, cap: usize) -> Result<Option<Vec<u8>>, reqwest::Error> {
    use http_body_util::BodyExt;
    let body = http::Response::<reqwest::Body>::from(resp).into_body();
    match http_body_util::Limited::new(body, cap).collect().await {
        Ok(collected) => Ok(Some(collected.to_bytes().to_vec())),
        Err(e) => match e.downcast::<reqwest::Error>() {
            Ok(e) => Err(*e),
            // The only other error is the limit's.
            Err(_) => Ok(None),
        },
    }
}

/// Why a capped JSON answer could not be had.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    #[error("{0}")]
    Read(#[from] reqwest::Error),
    #[error("the answer is longer than {0} bytes; not read")]
    TooLarge(usize),
    #[error("not the JSON expected: {0}")]
    Json(#[from] serde_json::Error),
}

/// `resp`'s JSON body, read with [`read_capped`] at `cap`.
pub async fn json_capped<T: serde::de::DeserializeOwned>(resp: reqwest::Response, cap: usize) -> Result<T, JsonError> {
    let body = read_capped(resp, cap).await?.ok_or(JsonError::TooLarge(cap))?;
    Ok(serde_json::from_slice(&body)?)
}
