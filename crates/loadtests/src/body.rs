//! Every answer the load generator reads from the network is read with a cap: a target
//! (or a probe, or an admin route) that answers an endless or gigabyte body costs at most
//! the cap, never the process. What is over the cap is not read; the caller says so.

/// The most of a target's answer (a checkout step, a fulfilment probe) that is read.
pub const MAX_ANSWER_BYTES: usize = 1 << 20;
/// The most of an admin answer that is read (the delivery log holds up to 16,384 entries).
pub const MAX_ADMIN_BYTES: usize = 64 << 20;

/// `resp`'s body, or `None` when it is longer than `cap` bytes (the rest is left unread
/// and the connection dropped with it).
pub async fn read_capped(mut resp: reqwest::Response, cap: usize) -> Result<Option<Vec<u8>>, reqwest::Error> {
    if resp.content_length().is_some_and(|n| n > cap as u64) {
        return Ok(None);
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        if body.len() + chunk.len() > cap {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
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

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// An HTTP server on a free port that answers every request 200 with a body that
    /// never ends (no length, 64 KiB writes until the client goes).
    pub async fn endless_server() -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let _ = s.read(&mut buf).await;
                    let _ = s
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n")
                        .await;
                    let chunk = vec![b' '; 64 << 10];
                    while s.write_all(&chunk).await.is_ok() {}
                });
            }
        });
        url
    }

    #[tokio::test]
    async fn an_endless_answer_is_cut_at_the_cap() {
        let url = endless_server().await;
        let resp = reqwest::get(&url).await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(read_capped(resp, 1 << 20).await.unwrap(), None);
        let resp = reqwest::get(&url).await.unwrap();
        let e = json_capped::<serde_json::Value>(resp, 4096).await.unwrap_err();
        assert_eq!(e.to_string(), "the answer is longer than 4096 bytes; not read");
    }
}
