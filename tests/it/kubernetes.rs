//! deploy/kubernetes/, checked without a cluster: the kustomization is rendered here the
//! way `kubectl apply -k` would for what it uses (generated ConfigMap and Secret, the
//! replacement that makes N one field, the image), then every container's command line,
//! after Kubernetes' `$(VAR)` expansion for each index of the Indexed Job, goes through
//! the real CLI parser; run ids are unique per index, the merge reads where the loaders
//! write, and Service names and ports match the URLs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use clap::Parser;
use fauxpay::cli::{Cli, Command, ReportCommand};
use serde::Deserialize;
use serde_yaml_ng::Value;

const DIR: &str = "deploy/kubernetes";

/// The resources after the kustomization's generators and replacements.
struct Rendered {
    kustomization: Value,
    resources: Vec<Value>,
    config: BTreeMap<String, String>,
}

impl Rendered {
    fn get(&self, kind: &str, name: &str) -> &Value {
        self.resources
            .iter()
            .find(|r| r["kind"] == kind && r["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
    }

    fn of_kind(&self, kind: &str) -> Vec<&Value> {
        self.resources.iter().filter(|r| r["kind"] == kind).collect()
    }
}

fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .filter(|v| !v.is_null())
        .collect()
}

fn literals(generator: &Value) -> BTreeMap<String, String> {
    generator["literals"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|l| {
            let (k, v) = l.as_str().unwrap().split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v:?}"))
}

fn render() -> Rendered {
    let dir = Path::new(DIR);
    let k = yaml_docs(&dir.join("kustomization.yaml")).remove(0);
    let namespace = s(&k["namespace"]).to_string();
    let mut resources: Vec<Value> = k["resources"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|f| yaml_docs(&dir.join(s(f))))
        .collect();
    // Every manifest in the folder is a resource of the kustomization.
    let listed: BTreeSet<&str> = k["resources"].as_sequence().unwrap().iter().map(s).collect();
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".yaml") && name != "kustomization.yaml" {
            assert!(listed.contains(name.as_str()), "{name} is not in kustomization.yaml");
        }
    }
    let cm = &k["configMapGenerator"][0];
    let config = literals(cm);
    for (kind, generator) in [("ConfigMap", cm), ("Secret", &k["secretGenerator"][0])] {
        assert_eq!(
            generator["options"]["disableNameSuffixHash"],
            Value::Bool(true),
            "names stay as the manifests spell them"
        );
        let data: serde_yaml_ng::Mapping = literals(generator)
            .into_iter()
            .map(|(k, v)| (Value::from(k), Value::from(v)))
            .collect();
        let mut doc = serde_yaml_ng::Mapping::new();
        doc.insert("apiVersion".into(), "v1".into());
        doc.insert("kind".into(), kind.into());
        doc.insert(
            "metadata".into(),
            Value::Mapping([("name".into(), generator["name"].clone())].into_iter().collect()),
        );
        let field = if kind == "Secret" { "stringData" } else { "data" };
        doc.insert(field.into(), Value::Mapping(data));
        resources.push(Value::Mapping(doc));
    }
    // Replacements: kustomize copies a scalar's value and keeps the target's type.
    for r in k["replacements"].as_sequence().unwrap() {
        let src = &r["source"];
        let from = resources
            .iter()
            .find(|d| d["kind"] == src["kind"] && d["metadata"]["name"] == src["name"])
            .unwrap_or_else(|| panic!("replacement source {src:?} exists"));
        let value = path(from, s(&src["fieldPath"])).clone();
        let value = s(&value).to_string();
        for t in r["targets"].as_sequence().unwrap() {
            let sel = &t["select"];
            let target = resources
                .iter_mut()
                .find(|d| d["kind"] == sel["kind"] && d["metadata"]["name"] == sel["name"])
                .unwrap_or_else(|| panic!("replacement target {sel:?} exists"));
            for fp in t["fieldPaths"].as_sequence().unwrap() {
                let slot = path_mut(target, s(fp));
                *slot = match slot {
                    Value::Number(_) => Value::from(value.parse::<u64>().expect("a whole number")),
                    _ => Value::from(value.clone()),
                };
            }
        }
    }
    for r in &resources {
        if r["kind"] != "Namespace" {
            assert!(
                r["metadata"]["namespace"].is_null(),
                "the kustomization sets the namespace"
            );
        }
    }
    assert!(resources
        .iter()
        .any(|r| r["kind"] == "Namespace" && r["metadata"]["name"] == namespace.as_str()));
    Rendered {
        kustomization: k,
        resources,
        config,
    }
}

fn path<'a>(v: &'a Value, p: &str) -> &'a Value {
    p.split('.').fold(v, |v, key| {
        let found = &v[key];
        assert!(!found.is_null(), "{p}: no {key}");
        found
    })
}

fn path_mut<'a>(v: &'a mut Value, p: &str) -> &'a mut Value {
    p.split('.').fold(v, |v, key| {
        v.as_mapping_mut()
            .and_then(|m| m.get_mut(key))
            .unwrap_or_else(|| panic!("{p}: no {key}"))
    })
}

fn pod_spec(workload: &Value) -> &Value {
    &workload["spec"]["template"]["spec"]
}

fn containers(workload: &Value) -> Vec<&Value> {
    let spec = pod_spec(workload);
    ["initContainers", "containers"]
        .iter()
        .filter_map(|k| spec[*k].as_sequence())
        .flatten()
        .collect()
}

fn container<'a>(workload: &'a Value, name: &str) -> &'a Value {
    containers(workload)
        .into_iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

/// The container's environment as Kubernetes builds it (literal `value`s, every key of an
/// `envFrom` ConfigMap; Secret references stand in as `<secret>`), plus `extra`.
fn env(r: &Rendered, c: &Value, extra: &[(&str, String)]) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for from in c["envFrom"].as_sequence().into_iter().flatten() {
        let name = s(&from["configMapRef"]["name"]);
        for (k, v) in r.get("ConfigMap", name)["data"].as_mapping().unwrap() {
            env.insert(s(k).to_string(), s(v).to_string());
        }
    }
    for e in c["env"].as_sequence().into_iter().flatten() {
        let value = if let Some(v) = e["value"].as_str() {
            v.to_string()
        } else {
            let sk = &e["valueFrom"]["secretKeyRef"];
            let secret = r.get("Secret", s(&sk["name"]));
            assert!(
                !secret["stringData"][s(&sk["key"])].is_null(),
                "secret {:?} has key {:?}",
                sk["name"],
                sk["key"]
            );
            "<secret>".to_string()
        };
        env.insert(s(&e["name"]).to_string(), value);
    }
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
    env
}

/// Kubernetes' `$(VAR)` expansion of a container's args; every reference must resolve.
fn argv(c: &Value, env: &BTreeMap<String, String>) -> Vec<String> {
    let mut argv = vec!["fauxpay".to_string()];
    for a in c["args"].as_sequence().expect("args") {
        let mut a = s(a).to_string();
        for (k, v) in env {
            a = a.replace(&format!("$({k})"), v);
        }
        assert!(!a.contains("$("), "unresolved reference in {a:?}");
        argv.push(a);
    }
    argv
}

fn parse(argv: &[String]) -> Command {
    match Cli::try_parse_from(argv) {
        Ok(cli) => cli.command,
        Err(e) => panic!("{argv:?} does not parse: {e}"),
    }
}

fn host_port(url: &str) -> (String, u16) {
    let u = reqwest::Url::parse(url).unwrap();
    (u.host_str().unwrap().to_string(), u.port_or_known_default().unwrap())
}

/// The Service `host` names, its port, and the container port its pods listen on.
fn check_service(r: &Rendered, url: &str, listens_on: u16) {
    let (host, port) = host_port(url);
    let svc = r.get("Service", &host);
    let p = &svc["spec"]["ports"][0];
    assert_eq!(p["port"].as_u64(), Some(port.into()), "{url}: the Service's port");
    assert_eq!(
        p["targetPort"].as_u64(),
        Some(listens_on.into()),
        "{url}: the pods' port"
    );
    // The Service selects the Deployment whose pods listen there.
    let selector = svc["spec"]["selector"].as_mapping().unwrap();
    let deployment = r
        .of_kind("Deployment")
        .into_iter()
        .find(|d| {
            let labels = d["spec"]["template"]["metadata"]["labels"].as_mapping().unwrap();
            selector.iter().all(|(k, v)| labels.get(k) == Some(v))
        })
        .unwrap_or_else(|| panic!("Service {host} selects no Deployment"));
    assert_eq!(
        deployment["spec"]["selector"]["matchLabels"],
        deployment["spec"]["template"]["metadata"]["labels"]
    );
    let c = &pod_spec(deployment)["containers"][0];
    assert_eq!(c["ports"][0]["containerPort"].as_u64(), Some(listens_on.into()));
}

#[test]
fn the_kustomization_renders_n_generators_and_a_gating_merge() {
    let r = render();
    let n: u64 = r.config["LOAD_GENERATORS"].parse().unwrap();
    assert!(n >= 2, "the example runs several generators");

    // The provider: its admin token from the Secret, one replica (its ledger is in memory).
    let provider = r.get("Deployment", "fauxpay-provider");
    assert_eq!(provider["spec"]["replicas"].as_u64(), Some(1));
    let pc = container(provider, "provider");
    let penv = env(&r, pc, &[]);
    assert_eq!(penv["FAUXPAY_ADMIN_TOKEN"], "<secret>");
    let Command::Serve(serve) = parse(&argv(pc, &penv)) else {
        panic!("the provider runs serve")
    };
    assert!(serve.addr.ip().is_unspecified());
    fauxpay_faults::bundled::load(&serve.profile).expect("a valid profile");
    assert_eq!(
        pc["readinessProbe"]["httpGet"]["port"].as_u64(),
        Some(serve.addr.port().into())
    );
    assert_eq!(pc["readinessProbe"]["httpGet"]["path"], "/__fauxpay/health");

    // The merchant, wired to the provider's Service.
    let merchant = r.get("Deployment", "fauxpay-merchant");
    let mc = container(merchant, "merchant");
    let Command::Merchant(m) = parse(&argv(mc, &env(&r, mc, &[]))) else {
        panic!("the merchant runs merchant")
    };
    check_service(&r, &m.provider, serve.addr.port());
    assert_eq!(
        mc["readinessProbe"]["httpGet"]["port"].as_u64(),
        Some(m.addr.port().into())
    );

    // The loaders: an Indexed Job of N, never rerunning an index.
    let job = r.get("Job", "fauxpay-load");
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    assert_eq!(job["spec"]["completions"].as_u64(), Some(n), "N from LOAD_GENERATORS");
    assert_eq!(job["spec"]["parallelism"].as_u64(), Some(n), "all N at once");
    assert_eq!(job["spec"]["backoffLimitPerIndex"].as_u64(), Some(0));
    assert_eq!(pod_spec(job)["restartPolicy"], "Never");
    let lc = container(job, "load");
    let mut run_ids = BTreeSet::new();
    let mut outs = BTreeSet::new();
    let mut seen_rate = None;
    for i in 0..n {
        let e = env(&r, lc, &[("JOB_COMPLETION_INDEX", i.to_string())]);
        assert_eq!(e["FAUXPAY_ADMIN_TOKEN"], "<secret>", "the loaders read the ledger");
        let Command::Load(load) = parse(&argv(lc, &e)) else {
            panic!("the loader runs load")
        };
        check_service(&r, &load.target, m.addr.port());
        check_service(&r, &load.provider, serve.addr.port());
        assert_eq!(load.generators as u64, n, "each runs 1/N of the rate");
        let rate = load.rate.expect("an open model");
        assert_eq!(rate.to_string(), r.config["LOAD_RATE"]);
        seen_rate.get_or_insert(rate);
        assert_eq!(load.max_double_charges, 0);
        run_ids.insert(load.run_id().expect("a valid run id"));
        outs.insert(load.out.clone());
    }
    assert_eq!(run_ids.len() as u64, n, "a run id per index: {run_ids:?}");
    assert_eq!(outs.len() as u64, n, "a report folder per index: {outs:?}");
    // The init container waits for the Services the loader dials.
    let wait = container(job, "wait-for-services");
    let script = s(&wait["command"][2]);
    for url in script.split_whitespace().filter(|w| w.starts_with("http://")) {
        let (host, _) = host_port(url);
        r.get("Service", &host);
    }
    assert!(script.contains("http://fauxpay-provider:12111/__fauxpay/health"));

    // The merge: waits for N reports where the loaders write them, and gates.
    let merge_job = r.get("Job", "fauxpay-merge");
    assert_eq!(
        merge_job["spec"]["backoffLimit"].as_u64(),
        Some(0),
        "a failed gate is final"
    );
    let mc = container(merge_job, "merge");
    let Command::Report {
        command: ReportCommand::Merge(merge),
    } = parse(&argv(mc, &env(&r, mc, &[])))
    else {
        panic!("the merge runs report merge")
    };
    assert_eq!(merge.expect, Some(n as usize));
    assert!(merge.wait >= std::time::Duration::from_secs(60));
    assert_eq!(merge.reports.len(), 1);
    let dir = &merge.reports[0];
    for out in &outs {
        assert_eq!(
            out.parent(),
            Some(dir.as_path()),
            "{} is one level under {}",
            out.display(),
            dir.display()
        );
        assert_ne!(out, &merge.out);
    }
    assert_eq!(
        merge.out.parent(),
        Some(dir.as_path()),
        "the merged report sits beside, and is skipped"
    );

    // Both Jobs mount the one shared volume at the same path.
    let mount = |w: &Value, c: &str| {
        let m = &container(w, c)["volumeMounts"][0];
        let vol = pod_spec(w)["volumes"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|v| v["name"] == m["name"])
            .unwrap();
        (
            s(&m["mountPath"]).to_string(),
            s(&vol["persistentVolumeClaim"]["claimName"]).to_string(),
        )
    };
    let (path, claim) = mount(job, "load");
    assert_eq!((path.clone(), claim.clone()), mount(merge_job, "merge"));
    assert!(dir.starts_with(&path));
    let pvc = r.get("PersistentVolumeClaim", &claim);
    assert_eq!(
        pvc["spec"]["accessModes"][0], "ReadWriteMany",
        "mounted by every pod at once"
    );

    // Every container runs the one image the kustomization names.
    let image = s(&r.kustomization["images"][0]["name"]);
    for w in r.of_kind("Deployment").into_iter().chain(r.of_kind("Job")) {
        for c in containers(w) {
            assert_eq!(s(&c["image"]), image, "{:?}", c["name"]);
        }
    }
}

/// With `FAUXPAY_KUBERNETES_VALIDATE` naming a `kubernetes-validate` executable (as
/// `deploy/kubernetes/validate.sh` does), the rendered resources are validated against
/// Kubernetes' schemas, strictly (unknown fields refused). `.ci/run` installs it (PyPI), so
/// under `CI` the test fails without it; elsewhere it says on the terminal that it skipped.
#[test]
fn the_rendered_resources_match_kubernetes_schemas_when_asked() {
    let r = render();
    let text: String = r
        .resources
        .iter()
        .map(|d| format!("---\n{}", serde_yaml_ng::to_string(d).unwrap()))
        .collect();
    let file = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kubernetes-rendered.yaml");
    std::fs::write(&file, text).unwrap();
    let Ok(validator) = std::env::var("FAUXPAY_KUBERNETES_VALIDATE") else {
        fauxpay_testkit::provider::missing_tool(
            "the Kubernetes schema validation",
            "FAUXPAY_KUBERNETES_VALIDATE is unset (deploy/kubernetes/validate.sh installs kubernetes-validate and sets it)",
        );
        return;
    };
    let out = std::process::Command::new(&validator)
        .args(["--strict", "--quiet"])
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("{validator}: {e}"));
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_docs_show_the_whole_flow() {
    let docs = std::fs::read_to_string("docs/deployment.md").unwrap();
    for step in [
        "kubectl apply -k deploy/kubernetes",
        "kubectl -n fauxpay wait --for=condition=complete",
        "job/fauxpay-merge",
        "LOAD_GENERATORS",
    ] {
        assert!(docs.contains(step), "docs/deployment.md lacks {step:?}");
    }
}
