//! The deployment files are checked against the code: probes and ports exist in the server, the
//! policy ConfigMap parses with the server's own loader, and every metric a rule or panel names is
//! one the server exports.

use schemagate::config::{DEFAULT_GRPC_LISTEN, DEFAULT_LISTEN};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every document of a YAML file, as JSON values.
fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("readable");
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .filter(|v| !v.is_null())
        .collect()
}

/// Every document of the YAML files in `k8s/` (not its components), in file name order.
fn manifests() -> Vec<Value> {
    manifests_in("k8s")
}

fn manifests_in(dir: &str) -> Vec<Value> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    paths.sort();
    paths.iter().flat_map(|path| yaml_docs(path)).collect()
}

fn kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in k8s/"))
}

fn port_of(addr: &str) -> u64 {
    addr.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a port")
}

#[test]
fn every_yaml_file_parses_and_kustomize_lists_what_exists() {
    let kustomization = yaml_docs(&root().join("k8s/kustomization.yaml"));
    for resource in kustomization[0]["resources"].as_array().expect("resources") {
        let file = resource.as_str().expect("a file name");
        assert!(
            root().join("k8s").join(file).exists(),
            "{file} is listed but missing"
        );
    }
    for kind_name in [
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "ServiceMonitor",
    ] {
        kind(&manifests(), kind_name);
    }
    for file in [
        "deploy/prometheus/rules.yml",
        "deploy/prometheus/rules_test.yml",
    ] {
        assert!(!yaml_docs(&root().join(file)).is_empty(), "{file}");
    }
}

#[tokio::test]
async fn probes_and_ports_exist_in_the_server() {
    let docs = manifests();
    let deployment = kind(&docs, "Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let ports: Vec<(String, u64)> = container["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .map(|p| {
            (
                p["name"].as_str().expect("name").to_owned(),
                p["containerPort"].as_u64().expect("port"),
            )
        })
        .collect();
    assert!(
        ports.contains(&("http".into(), port_of(DEFAULT_LISTEN))),
        "{ports:?}"
    );
    assert!(
        ports.contains(&("grpc".into(), port_of(DEFAULT_GRPC_LISTEN))),
        "{ports:?}"
    );
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(args.contains(&"--listen=0.0.0.0:8080"), "{args:?}");
    assert!(args.contains(&"--grpc-listen=0.0.0.0:50051"), "{args:?}");
    // The arguments parse with the server's own flags.
    let mut argv = vec!["serve"];
    argv.extend(args.iter().skip(1));
    let parsed =
        <schemagate::config::ServeArgs as clap::Parser>::try_parse_from(argv).expect("flags parse");
    assert_eq!(parsed.listen.port() as u64, port_of(DEFAULT_LISTEN));

    assert_eq!(
        container["startupProbe"]["grpc"]["port"],
        port_of(DEFAULT_GRPC_LISTEN)
    );
    let app = crate::helpers::spawn_app().await;
    for probe in ["livenessProbe", "readinessProbe"] {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["port"], "http", "{probe}");
        let path = get["path"].as_str().expect("path");
        assert_eq!(app.get(path).await.0, 200, "{probe} {path}");
    }
    let monitor = kind(&docs, "ServiceMonitor");
    let endpoint = &monitor["spec"]["endpoints"][0];
    let (status, body) = app.get(endpoint["path"].as_str().expect("path")).await;
    assert_eq!(status, 200);
    assert!(body.contains("# TYPE"), "prometheus text");

    let service = kind(&docs, "Service");
    for p in service["spec"]["ports"].as_array().expect("ports") {
        let target = p["targetPort"].as_str().expect("named target port");
        assert!(
            ports.iter().any(|(n, _)| n == target),
            "service port {target}"
        );
    }
    assert_eq!(endpoint["port"], "http");
}

#[test]
fn the_pod_runs_locked_down() {
    let docs = manifests();
    let deployment = kind(&docs, "Deployment");
    assert!(deployment["spec"]["replicas"].as_u64().expect("replicas") >= 2);
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let c = &pod["containers"][0];
    let sc = &c["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["drop"][0], "ALL");
    for key in ["requests", "limits"] {
        assert!(
            c["resources"][key]["cpu"].is_string() && c["resources"][key]["memory"].is_string(),
            "{key}"
        );
    }
    // Longer than the drain delay and the server's grace together, so checks in flight finish.
    let grace = pod["terminationGracePeriodSeconds"]
        .as_u64()
        .expect("grace");
    let env = |name: &str| {
        c["env"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["name"].as_str() == Some(name))
            .and_then(|e| e["value"].as_str())
            .and_then(|v| v.parse::<u64>().ok())
    };
    let delay =
        env("SCHEMAGATE_DRAIN_DELAY_SECS").unwrap_or(schemagate::config::DEFAULT_DRAIN_DELAY_SECS);
    let shutdown = env("SCHEMAGATE_SHUTDOWN_GRACE_SECS")
        .unwrap_or(schemagate::config::DEFAULT_SHUTDOWN_GRACE_SECS);
    assert!(grace > delay + shutdown, "{grace} <= {delay} + {shutdown}");
}

#[test]
fn the_policy_configmap_is_the_example_policy_and_parses() {
    let example = read("deploy/policy.toml");
    assert_eq!(
        read("k8s/policy.toml"),
        example,
        "k8s/policy.toml must be a copy of deploy/policy.toml"
    );
    let policy =
        schemagate::core::policy::Policy::from_toml_str(&example).expect("the server loads it");
    let rules = policy.rules_for(Some("partner-crm"), Some("charge_card"));
    assert_eq!(rules.tier, schemagate::core::domain::Tier::Untrusted);

    let kustomization = &yaml_docs(&root().join("k8s/kustomization.yaml"))[0];
    let generator = &kustomization["configMapGenerator"][0];
    assert_eq!(generator["files"][0], "policy.toml");
    assert_eq!(
        generator["options"]["disableNameSuffixHash"], true,
        "a stable name lets an edit reach the pod without a restart"
    );
    let docs = manifests();
    let pod = &kind(&docs, "Deployment")["spec"]["template"]["spec"];
    let mount = whole_mount(pod, "the policy ConfigMap", |v| {
        v["configMap"]["name"] == generator["name"]
    });
    let policy_arg = format!("--policy={mount}/policy.toml");
    let args = &pod["containers"][0]["args"];
    assert!(
        args.as_array()
            .expect("args")
            .iter()
            .any(|a| a == &Value::String(policy_arg.clone())),
        "{policy_arg}"
    );
}

/// Metric names in PromQL text, histogram suffixes mapped to their series.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while let Some(at) = expr[i..].find("schemagate_") {
        let start = i + at;
        let preceded_by_name =
            start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b':');
        let end = expr[start..]
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
            .map_or(expr.len(), |n| start + n);
        if !preceded_by_name {
            let name = &expr[start..end];
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .unwrap_or(name);
            names.insert(base.to_owned());
        }
        i = end;
    }
    names
}

#[test]
fn every_metric_a_rule_or_panel_names_is_exported() {
    let exported: BTreeSet<&str> = schemagate::core::metrics::ALL.into_iter().collect();
    let mut used = BTreeSet::new();
    let rules = &yaml_docs(&root().join("deploy/prometheus/rules.yml"))[0];
    for group in rules["groups"].as_array().expect("groups") {
        for rule in group["rules"].as_array().expect("rules") {
            used.extend(metric_names(rule["expr"].as_str().expect("expr")));
            for text in rule["annotations"]
                .as_object()
                .into_iter()
                .flat_map(|a| a.values())
            {
                used.extend(metric_names(text.as_str().unwrap_or_default()));
            }
        }
    }
    let dashboard: Value =
        serde_json::from_str(&read("deploy/grafana/schemagate.json")).expect("dashboard JSON");
    assert_eq!(dashboard["uid"], "schemagate");
    let vars: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .expect("variables")
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert!(
        vars.contains(&"server") && vars.contains(&"tool"),
        "{vars:?}"
    );
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            used.extend(metric_names(target["expr"].as_str().expect("expr")));
        }
    }
    assert!(used.len() >= 8, "{used:?}");
    let unknown: Vec<_> = used
        .iter()
        .filter(|n| !exported.contains(n.as_str()))
        .collect();
    assert!(unknown.is_empty(), "named but not exported: {unknown:?}");
}

#[test]
fn metric_names_are_found_in_promql() {
    let names = metric_names(
        "histogram_quantile(0.99, sum by (le) (rate(schemagate_validation_duration_seconds_bucket[5m]))) / schemagate:x:y + schemagate_cache_hits_total",
    );
    let expected: BTreeSet<String> = [
        "schemagate_validation_duration_seconds",
        "schemagate_cache_hits_total",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(names, expected);
}

/// Where the pod's container mounts the volume `is_it` picks (`what`, for messages), asserting
/// the mount is the whole volume: a subPath mount never sees updates.
fn whole_mount<'a>(pod: &'a Value, what: &str, is_it: impl Fn(&Value) -> bool) -> &'a str {
    let volume = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| is_it(v))
        .unwrap_or_else(|| panic!("{what} is mounted"));
    let mount = pod["containers"][0]["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .find(|m| m["name"] == volume["name"])
        .unwrap_or_else(|| panic!("{what} is mounted in the container"));
    assert!(
        mount.get("subPath").is_none(),
        "{what}: subPath mounts never see updates"
    );
    mount["mountPath"].as_str().expect("path")
}

#[test]
fn the_token_secret_is_mounted_and_used_and_only_clients_are_admitted() {
    let auth = schemagate::core::auth::Auth::new(Some(root().join("k8s/tokens.toml")), Vec::new())
        .expect("the server loads the shipped token file");
    assert!(auth.is_enabled() && auth.count() == 1);
    let kustomization = &yaml_docs(&root().join("k8s/kustomization.yaml"))[0];
    let generator = &kustomization["secretGenerator"][0];
    assert_eq!(generator["files"][0], "tokens.toml");
    assert_eq!(generator["options"]["disableNameSuffixHash"], true);
    let docs = manifests();
    let pod = &kind(&docs, "Deployment")["spec"]["template"]["spec"];
    let mount = whole_mount(pod, "the token Secret", |v| {
        v["secret"]["secretName"] == generator["name"]
    });
    let arg = format!("--auth-tokens={mount}/tokens.toml");
    assert!(
        pod["containers"][0]["args"]
            .as_array()
            .expect("args")
            .iter()
            .any(|a| a == arg.as_str()),
        "the server is started with {arg}"
    );
    // Every ingress rule names who it admits; none is open to any pod.
    let policy = kind(&docs, "NetworkPolicy");
    let rules = policy["spec"]["ingress"].as_array().expect("ingress");
    assert!(!rules.is_empty());
    for rule in rules {
        let from = rule["from"].as_array().expect("a `from` on every rule");
        assert!(
            from.iter()
                .all(|peer| peer["podSelector"]["matchLabels"].is_object()),
            "{rule}"
        );
    }
    assert!(
        rules
            .iter()
            .any(|r| r["from"][0]["podSelector"]["matchLabels"]["schemagate.io/client"] == "true"),
        "clients are admitted by their label"
    );
}

#[test]
fn the_shared_registry_components_wire_redis_and_a_headless_grpc_service() {
    let base = manifests();
    let deployment = kind(&base, "Deployment");
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    // The headless Service lists every ready pod on the gRPC port.
    let headless = base
        .iter()
        .find(|d| d["kind"] == "Service" && d["spec"]["clusterIP"] == "None")
        .expect("a headless Service for gRPC clients");
    for (label, value) in headless["spec"]["selector"].as_object().expect("selector") {
        assert_eq!(&pod_labels[label], value, "selects the pods by {label}");
    }
    assert_eq!(headless["spec"]["ports"][0]["targetPort"], "grpc");

    // The overlay uses both components, which exist.
    let overlay = &yaml_docs(&root().join("k8s/overlays/shared-registry/kustomization.yaml"))[0];
    let components: Vec<&str> = overlay["components"]
        .as_array()
        .expect("components")
        .iter()
        .map(|c| c.as_str().expect("a path"))
        .collect();
    for component in &components {
        let dir = root().join("k8s/overlays/shared-registry").join(component);
        let k = &yaml_docs(&dir.join("kustomization.yaml"))[0];
        assert_eq!(k["kind"], "Component", "{component}");
        for resource in k["resources"].as_array().into_iter().flatten() {
            assert!(dir.join(resource.as_str().expect("file")).exists());
        }
    }

    // The registry component passes a URL the server accepts, naming the Redis the redis
    // component runs.
    let registry = &yaml_docs(&root().join("k8s/components/registry/kustomization.yaml"))[0];
    let env_file = registry["secretGenerator"][0]["envs"][0]
        .as_str()
        .expect("env file");
    let env = read(&format!("k8s/components/registry/{env_file}"));
    let url = env
        .lines()
        .find_map(|l| l.strip_prefix("SCHEMAGATE_REGISTRY="))
        .expect("SCHEMAGATE_REGISTRY in the Secret");
    let args =
        <schemagate::config::ServeArgs as clap::Parser>::parse_from(["serve", "--registry", url]);
    args.gate_config().expect("the server accepts the URL");
    let redis = manifests_in("k8s/components/redis");
    let service = kind(&redis, "Service");
    let host = service["metadata"]["name"].as_str().expect("name");
    assert!(url.starts_with(&format!("redis://{host}:")), "{url}");
    let statefulset = kind(&redis, "StatefulSet");
    assert_eq!(statefulset["spec"]["replicas"], 1);
    assert!(statefulset["spec"]["volumeClaimTemplates"][0]["spec"]["resources"].is_object());
    let redis_args = &statefulset["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(
        redis_args
            .as_array()
            .expect("args")
            .windows(2)
            .any(|w| w[0] == "--maxmemory-policy" && w[1] == "noeviction"),
        "registrations are never evicted"
    );
    // Redis admits schemagate's pods alone; schemagate may reach Redis.
    let policy = kind(&redis, "NetworkPolicy");
    let from = &policy["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"];
    for (label, value) in from.as_object().expect("labels") {
        assert_eq!(&pod_labels[label], value);
    }
    let patches = registry["patches"].as_array().expect("patches");
    let egress = patches
        .iter()
        .find(|p| p["target"]["kind"] == "NetworkPolicy")
        .and_then(|p| p["patch"].as_str())
        .expect("an egress patch");
    assert!(egress.contains("port: 6379"));
    let deployment_patch =
        &yaml_docs(&root().join("k8s/components/registry/deployment-patch.yaml"))[0];
    let container = &deployment_patch["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["envFrom"][0]["secretRef"]["name"],
        registry["secretGenerator"][0]["name"]
    );
    assert_eq!(container["startupProbe"]["httpGet"]["path"], "/healthz");
}

#[test]
fn the_gateway_component_runs_the_gateway_on_the_routes_it_lists() {
    let dir = "k8s/components/gateway";
    let component = &yaml_docs(&root().join(dir).join("kustomization.yaml"))[0];
    assert_eq!(component["kind"], "Component");
    for resource in component["resources"].as_array().expect("resources") {
        let file = resource.as_str().expect("a file");
        assert!(root().join(dir).join(file).exists(), "{file}");
    }
    let docs = manifests_in(dir);
    let deployment = kind(&docs, "Deployment");
    let pod = &deployment["spec"]["template"];
    let container = &pod["spec"]["containers"][0];

    // The arguments and the routes ConfigMap make a configuration the gateway accepts.
    let env_file = component["configMapGenerator"][0]["envs"][0]
        .as_str()
        .expect("routes env file");
    let routes = read(&format!("{dir}/{env_file}"));
    let routes = routes
        .lines()
        .find_map(|l| l.strip_prefix("SCHEMAGATE_ROUTES="))
        .expect("SCHEMAGATE_ROUTES");
    assert_eq!(
        container["envFrom"][0]["configMapRef"]["name"],
        component["configMapGenerator"][0]["name"]
    );
    let mut args: Vec<String> = vec!["schemagate".into()];
    for arg in container["args"].as_array().expect("args") {
        let arg = arg.as_str().expect("an argument");
        // The files the pod mounts, from where they come in the repository.
        let root = root().display().to_string();
        let arg = arg
            .replace("/etc/schemagate/", &format!("{root}/deploy/"))
            .replace("/etc/schemagate-tokens/", &format!("{root}/k8s/"));
        args.push(arg);
    }
    for route in routes.split(' ') {
        args.push(format!("--route={route}"));
    }
    let cli = <schemagate::config::Cli as clap::Parser>::try_parse_from(&args)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let schemagate::config::Command::Gateway(gateway) = cli.command else {
        panic!("the container runs `schemagate gateway`");
    };
    let config = gateway
        .gateway_config()
        .expect("a configuration the gateway accepts");
    assert_eq!(config.routes.len(), 2);

    // The probes, the Service, the NetworkPolicy and the ServiceMonitor name the ports the
    // gateway listens on.
    let port = |name: &str| {
        container["ports"]
            .as_array()
            .expect("ports")
            .iter()
            .find(|p| p["name"] == name)
            .and_then(|p| p["containerPort"].as_u64())
            .unwrap_or_else(|| panic!("container port {name}"))
    };
    assert_eq!(port("mcp"), u64::from(gateway.listen.port()));
    assert_eq!(
        Some(port("metrics")),
        gateway.metrics_listen.map(|a| u64::from(a.port()))
    );
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    let service = kind(&docs, "Service");
    let labels = &pod["metadata"]["labels"];
    for (label, value) in service["spec"]["selector"].as_object().expect("selector") {
        assert_eq!(
            &labels[label], value,
            "the Service selects the pods by {label}"
        );
    }
    let policy = kind(&docs, "NetworkPolicy");
    assert_eq!(
        policy["spec"]["ingress"][0]["ports"][0]["port"].as_u64(),
        Some(port("mcp"))
    );
    assert!(
        !policy["spec"]["egress"]
            .as_array()
            .expect("egress")
            .is_empty(),
        "the gateway reaches its upstreams"
    );
    assert_eq!(
        kind(&docs, "ServiceMonitor")["spec"]["endpoints"][0]["port"],
        "metrics"
    );

    // The overlay runs two replicas of it beside the base.
    let overlay = &yaml_docs(&root().join("k8s/overlays/gateway/kustomization.yaml"))[0];
    assert_eq!(overlay["components"][0], "../../components/gateway");
    assert_eq!(
        overlay["replicas"][0]["name"],
        deployment["metadata"]["name"]
    );
    assert_eq!(overlay["replicas"][0]["count"], 2);
}
