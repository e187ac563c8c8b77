//! docker-compose.yml, checked without a Docker engine: every fauxpay service's command
//! goes through the real CLI parser, and ports and URLs agree across services.

use std::collections::BTreeSet;

use clap::Parser;
use fauxpay::cli::{Cli, Command};
use serde_yaml_ng::Value;

fn compose() -> Value {
    serde_yaml_ng::from_str(&std::fs::read_to_string("docker-compose.yml").unwrap())
        .expect("docker-compose.yml is YAML")
}

fn command(service: &Value) -> Vec<String> {
    service["command"]
        .as_sequence()
        .expect("command is a list")
        .iter()
        .map(|v| v.as_str().expect("string args").to_string())
        .collect()
}

fn parse(service: &Value) -> Command {
    let mut argv = vec!["fauxpay".to_string()];
    argv.extend(command(service));
    match Cli::try_parse_from(&argv) {
        Ok(cli) => cli.command,
        Err(e) => panic!("{argv:?} does not parse: {e}"),
    }
}

fn published(service: &Value) -> Vec<(u16, u16)> {
    service["ports"]
        .as_sequence()
        .map(|ports| {
            ports
                .iter()
                .map(|p| {
                    let (host, container) = p.as_str().unwrap().split_once(':').unwrap();
                    (host.parse().unwrap(), container.parse().unwrap())
                })
                .collect()
        })
        .unwrap_or_default()
}

fn host_port(url: &str) -> (String, u16) {
    let u = reqwest::Url::parse(url).unwrap();
    (u.host_str().unwrap().to_string(), u.port_or_known_default().unwrap())
}

fn healthcheck_port(service: &Value) -> Option<u16> {
    let test = service["healthcheck"]["test"].as_sequence()?;
    test.iter()
        .filter_map(Value::as_str)
        .find(|a| a.starts_with("http://"))
        .map(|u| host_port(u).1)
}

#[test]
fn services_parse_and_agree_on_ports_and_urls() {
    let c = compose();
    let services = c["services"].as_mapping().unwrap();
    let names: BTreeSet<&str> = services.keys().map(|k| k.as_str().unwrap()).collect();
    assert_eq!(
        names,
        BTreeSet::from(["load", "merchant", "postgres", "provider", "redis"])
    );
    let s = |n: &str| &c["services"][n];

    // redis and postgres: the ports the fauxpay services dial.
    let redis_cmd = command(s("redis"));
    let redis_port: u16 = redis_cmd[redis_cmd.iter().position(|a| a == "--port").unwrap() + 1]
        .parse()
        .unwrap();
    assert!(published(s("redis")).contains(&(redis_port, redis_port)));
    assert!(published(s("postgres")).contains(&(5432, 5432)));
    assert_eq!(s("postgres")["environment"]["POSTGRES_HOST_AUTH_METHOD"], "trust");

    let Command::Serve(provider) = parse(s("provider")) else {
        panic!("provider runs serve")
    };
    let provider_port = provider.addr.port();
    assert!(
        provider.addr.ip().is_unspecified(),
        "listens on all interfaces inside its container"
    );
    assert!(published(s("provider")).contains(&(provider_port, provider_port)));
    assert_eq!(healthcheck_port(s("provider")), Some(provider_port));
    fauxpay_faults::bundled::load(&provider.profile).expect("the provider's profile is valid");

    let Command::Merchant(merchant) = parse(s("merchant")) else {
        panic!("merchant runs merchant")
    };
    let merchant_port = merchant.addr.port();
    assert!(published(s("merchant")).contains(&(merchant_port, merchant_port)));
    assert_eq!(healthcheck_port(s("merchant")), Some(merchant_port));
    assert_eq!(host_port(&merchant.provider), ("provider".to_string(), provider_port));
    assert_eq!(
        host_port(merchant.redis.as_deref().expect("on redis")),
        ("redis".to_string(), redis_port)
    );
    assert_eq!(
        host_port(merchant.postgres.as_deref().expect("on postgres")),
        ("postgres".to_string(), 5432)
    );
    assert_eq!(merchant.strategy.as_str(), "idempotent");

    let Command::Load(load) = parse(s("load")) else {
        panic!("load runs load")
    };
    assert_eq!(host_port(&load.target), ("merchant".to_string(), merchant_port));
    assert_eq!(host_port(&load.provider), ("provider".to_string(), provider_port));
    assert_eq!(load.max_double_charges, 0);
    let volume = s("load")["volumes"][0].as_str().unwrap();
    assert_eq!(
        volume.split_once(':').unwrap().1,
        load.out.to_str().unwrap(),
        "reports land in the volume"
    );

    // depends_on names real services.
    for (name, service) in services {
        if let Some(deps) = service["depends_on"].as_mapping() {
            for dep in deps.keys() {
                assert!(
                    names.contains(dep.as_str().unwrap()),
                    "{name:?} depends on unknown {dep:?}"
                );
            }
        }
    }
}

#[test]
fn the_docs_start_every_fauxpay_service_the_same_way_by_hand() {
    let docs = std::fs::read_to_string("docs/deployment.md").unwrap();
    let c = compose();
    for name in ["provider", "merchant", "load"] {
        let by_hand = format!("fauxpay {}", command(&c["services"][name]).join(" "));
        let by_hand = by_hand
            .replace("http://provider:", "http://127.0.0.1:")
            .replace("http://merchant:", "http://127.0.0.1:");
        let by_hand = by_hand
            .replace("redis://redis:", "redis://127.0.0.1:")
            .replace("@postgres:", "@127.0.0.1:");
        let by_hand = by_hand
            .replace("0.0.0.0:", "127.0.0.1:")
            .replace("--out /reports", "--out fauxpay-report")
            .replace("--data-dir /var/lib/fauxpay", "--data-dir ./provider-data");
        assert!(
            docs.contains(&by_hand),
            "docs/deployment.md lacks the by-hand command for {name}:\n{by_hand}"
        );
    }
}

#[test]
fn dockerfile_is_multi_stage_and_builds_the_binary() {
    let d = std::fs::read_to_string("Dockerfile").unwrap();
    assert_eq!(d.lines().filter(|l| l.starts_with("FROM ")).count(), 2);
    assert!(d.contains("cargo build --release --locked --bin fauxpay"));
    assert!(d.contains("COPY --from=build"));
    // fauxpay runs under an init (tini), so a SIGTERM before its handlers stops it.
    let entry = d.lines().find(|l| l.starts_with("ENTRYPOINT ")).expect("an ENTRYPOINT");
    let entry: Vec<String> = serde_json::from_str(entry.trim_start_matches("ENTRYPOINT ")).expect("exec form");
    assert_eq!(entry, ["/usr/bin/tini", "--", "fauxpay"]);
    assert!(d.contains(" tini "), "the runtime stage installs tini");
}
