//! Misbehaving servers for the tests of what fauxpay reads from the network, and the
//! memory figure those tests hold it to.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An HTTP server on a free port that answers every request 200 with a body that never
/// ends (no length, 64 KiB writes until the client goes); its base URL.
pub async fn endless_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 8192];
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

/// A field of `/proc/PID/status` in bytes (`VmRSS`: resident now; `VmHWM`: its peak), for
/// `pid` or this process; `None` once the process is gone.
pub fn memory(pid: Option<u32>, field: &str) -> Option<u64> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/status"),
        None => "/proc/self/status".to_string(),
    };
    let status = std::fs::read_to_string(path).ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// This process's resident memory, in bytes.
pub fn resident() -> u64 {
    memory(None, "VmRSS").expect("/proc/self/status has VmRSS")
}
