use super::*;

fn ini(text: &str) -> Result<Fleet, Bad> {
    ini::parse(text).and_then(|i| i.fleet())
}

fn yaml(text: &str) -> Result<Fleet, Bad> {
    yaml::parse(text).and_then(|i| i.fleet())
}

fn target(text: &str) -> SshTarget {
    text.parse().unwrap()
}

/// The error's line and whether its text holds `words`.
fn fails_at(result: Result<Fleet, Bad>, line: usize, words: &str) {
    let bad = result.expect_err("accepted");
    assert_eq!(bad.line, line, "{bad:?}");
    assert!(bad.problem.contains(words), "{bad:?}");
}

const INI: &str = "\
# the lab's two machines
[all:vars]
ansible_user=ops
ansible_port=2200

[load]
gen1 ansible_host=10.0.0.1 ansible_port=2222   # its own port

[corelane_tx:children]
load

[corelane_rx]
recv ansible_host=\"10.0.0.2\"

[corelane_rx:vars]
ansible_user=root
ansible_ssh_private_key_file=/keys/rx
";

#[test]
fn ini_children_host_and_group_vars_merge_as_ansible_does() {
    let fleet = ini(INI).unwrap();
    let mut tx = target("ops@10.0.0.1:2222");
    assert_eq!(fleet.tx.first().cloned(), Some(tx.clone()));
    let mut rx = target("root@10.0.0.2:2200");
    rx.identity_file = Some("/keys/rx".into());
    assert_eq!(fleet.rx, Some(rx));
    // A child group's vars win over its parent's, and over `all`.
    let child = INI.replace("[load]", "[load:vars]\nansible_user=child\n[load]");
    tx.user = Some("child".into());
    assert_eq!(ini(&child).unwrap().tx.first().cloned(), Some(tx));
}

const YAML: &str = "\
all:
  vars:
    ansible_user: ops
    ansible_port: 2200
  children:
    corelane_tx:
      children:
        load:
          hosts:
            gen1:
              ansible_host: 10.0.0.1
              ansible_port: 2222
          vars:
            ansible_user: child
    corelane_rx:
      hosts:
        recv: {ansible_host: 10.0.0.2}
      vars:
        ansible_user: root
        ansible_ssh_private_key_file: /keys/rx
        other: [ignored, list]
";

#[test]
fn yaml_children_host_and_group_vars_merge_as_ansible_does() {
    let fleet = yaml(YAML).unwrap();
    assert_eq!(fleet.tx.first().cloned(), Some(target("child@10.0.0.1:2222")));
    let mut rx = target("root@10.0.0.2:2200");
    rx.identity_file = Some("/keys/rx".into());
    assert_eq!(fleet.rx, Some(rx));
}

#[test]
fn older_spellings_and_yaml_merge_keys_are_read() {
    let old =
        "[corelane_tx]\nt ansible_ssh_host=10.0.0.1 ansible_ssh_port=2022 ansible_ssh_user=u\n";
    assert_eq!(ini(old).unwrap().tx.first().cloned(), Some(target("u@10.0.0.1:2022")));
    let both =
        "[corelane_tx]\nt ansible_host=10.0.0.1\n[corelane_tx:vars]\nansible_ssh_host=10.0.0.9\n";
    fails_at(ini(both), 4, "both ansible_host and ansible_ssh_host");
    let merged = "\
defaults: &defaults {ansible_user: ops, ansible_port: 2022}
corelane_tx:
  hosts:
    t:
      <<: *defaults
      ansible_port: 2222
      ansible_host: 10.0.0.1
";
    // `defaults` is a group without hosts: the merge is all that uses it.
    let merged = merged.replace("defaults: &defaults", "spare:\n  vars: &defaults");
    assert_eq!(yaml(&merged).unwrap().tx.first().cloned(), Some(target("ops@10.0.0.1:2222")));
    let list = "corelane_tx:\n  hosts:\n    t:\n      <<: [{a: 1}]\n";
    fails_at(yaml(list), 4, "merge one mapping");
}

#[test]
fn a_host_without_ansible_host_is_reached_by_its_name_and_host_port() {
    let fleet = ini("[corelane_tx]\nbox1:2022\n[corelane_rx]\nfd00::2\n").unwrap();
    assert_eq!(fleet.tx.first().cloned(), Some(target("box1:2022")));
    assert_eq!(fleet.rx, Some(target("[fd00::2]")));
}

#[test]
fn ini_errors_name_the_line_and_the_fix() {
    fails_at(ini("[corelane_tx]\na\n[corelane_rx:hosts]\nb\n"), 3, "unknown section kind");
    fails_at(ini("[corelane_tx\na\n"), 1, "section header");
    fails_at(ini("[corelane_tx]\na ansible_port=70000\n"), 2, "1-65535");
    fails_at(ini("[corelane_tx]\na ansible_port=0\n"), 2, "1-65535");
    fails_at(ini("[corelane_tx:vars]\nansible_port=x\n[corelane_tx]\na\n"), 2, "not a port");
    fails_at(ini("[corelane_tx]\nweb[01:03]\n"), 2, "host ranges are not supported");
    fails_at(ini("[corelane_tx]\na b\n"), 2, "key=value");
    fails_at(ini("[corelane_tx]\na 'x=1\n"), 2, "unclosed quote");
    fails_at(ini("[g:vars]\nno value\n"), 2, "key=value");
    fails_at(ini("[x]\na\n"), 0, "no host in corelane_tx or corelane_rx");
    fails_at(ini("# nothing\n"), 0, "no host in corelane_tx or corelane_rx");
    fails_at(ini("[a:children]\nb\n[b:children]\na\n"), 1, "its own ancestor");
}

/// A fleet's inventory lists more than the lab's two hosts: the others are left alone.
#[test]
fn hosts_outside_the_two_groups_are_ignored() {
    let fleet = ini("[web]\nw1\nw2\n[corelane_tx]\na\n[corelane_rx]\nb\n[db]\nd1 ansible_port=5\n")
        .unwrap();
    assert_eq!((fleet.tx.first().cloned(), fleet.rx), (Some(target("a")), Some(target("b"))));
    let fleet = yaml("web:\n  hosts:\n    w1:\ncorelane_tx:\n  hosts:\n    a:\n").unwrap();
    assert_eq!(fleet.tx.first().cloned(), Some(target("a")));
}

#[test]
fn several_load_hosts_are_read_in_order_and_bounded() {
    let two = ini("[corelane_tx]\ngen1\ngen2 ansible_port=2222\n[corelane_rx]\nrecv\n").unwrap();
    assert_eq!(two.tx, vec![target("gen1"), target("gen2:2222")]);
    let yaml_two = yaml("corelane_tx:\n  hosts:\n    gen1:\n    gen2:\n").unwrap();
    assert_eq!(yaml_two.tx, vec![target("gen1"), target("gen2")]);
    let many: String = (0..=MAX_LOAD_HOSTS).map(|i| format!("g{i}\n")).collect();
    fails_at(ini(&format!("[corelane_tx]\n{many}")), 1, "more than 32 load hosts");
    fails_at(ini("[corelane_rx]\nr1\nr2\n"), 1, "one receiver");
}

#[test]
fn yaml_errors_name_the_line_and_the_fix() {
    fails_at(yaml("corelane_tx:\n  hostz:\n    a:\n"), 2, "hosts:, vars: and children:");
    fails_at(yaml("corelane_tx:\n  hosts:\n    - a\n"), 3, "a mapping");
    fails_at(yaml("corelane_tx:\n  hosts:\n    a:\n      ansible_port: 65536\n"), 4, "1-65535");
    fails_at(
        yaml("corelane_tx:\n  hosts:\n    a:\n      ansible_host: [x]\n"),
        4,
        "list or mapping",
    );
    fails_at(yaml("corelane_tx:\n  hosts:\n    a: {\n"), 4, "fix the YAML");
    fails_at(yaml("- a\n"), 1, "mapping of groups");
    fails_at(yaml("corelane_tx:\n  hosts:\n    web[01:03]:\n"), 3, "host ranges");
    fails_at(yaml("x:\n  hosts:\n    a:\n"), 0, "no host in corelane_tx or corelane_rx");
}

/// Every string that would reach ssh as an option or as more than one argument is refused,
/// as a name and as each var the lab uses.
#[test]
fn ssh_option_injection_is_refused_in_names_and_vars() {
    for bad in ["-oProxyCommand=x", "a\\ b", "'a;b'"] {
        let text = format!("[corelane_tx]\n{bad}\n");
        assert!(ini(&text).is_err(), "host {bad:?} accepted");
    }
    for var in ["ansible_host", "ansible_user"] {
        for bad in ["-oProxyCommand=touch\\ /tmp/x", "'a b'", "\"a\\nb\"", "''"] {
            let text = format!("[corelane_tx]\nh {var}={bad}\n");
            let bad = ini(&text).expect_err(&text);
            assert_eq!(bad.line, 2, "{bad:?}");
        }
    }
    let newline = "corelane_tx:\n  hosts:\n    h:\n      ansible_host: \"a\\n-oProxyCommand=x\"\n";
    fails_at(yaml(newline), 4, "host h");
    let key = "corelane_tx:\n  hosts:\n    h:\n      ansible_ssh_private_key_file: \"k\\n\"\n";
    fails_at(yaml(key), 4, "not a file path");
}

/// Nine levels of ten aliases each would be 10^9 nodes: refused once the count passes the
/// bound, long before memory or time grows.
#[test]
fn billion_laughs_and_deep_nesting_are_bounded() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        text.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    let started = std::time::Instant::now();
    fails_at(yaml(&text), 5, "more than 100000 nodes");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    // Flow nesting: the parser's own recursion limit; block nesting: ours.
    let deep = format!("corelane_tx: {}{}", "[".repeat(10_000), "]".repeat(10_000));
    fails_at(yaml(&deep), 1, "recursion limit exceeded");
    let deep: String = (0..1000).map(|i| format!("{}a:\n", " ".repeat(i))).collect();
    fails_at(yaml(&deep), 65, "nested deeper than 64");
    let deep_children: String = (0..200)
        .map(|i| format!("{}g{i}:\n{}  children:\n", "    ".repeat(i), "    ".repeat(i)))
        .collect();
    assert!(yaml(&deep_children).unwrap_err().problem.contains("deeper than 64"));
}

#[test]
fn only_a_regular_file_within_the_cap_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.ini");
    std::fs::write(&big, vec![b'#'; MAX_BYTES as usize + 1]).unwrap();
    let err = load(&big).unwrap_err().to_string();
    assert!(err.contains("larger than 1048576 bytes"), "{err}");
    let fifo = dir.path().join("fifo");
    rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, 0o600.into(), 0)
        .unwrap();
    // A FIFO nobody writes to reads as empty at once (no hang): an inventory with no hosts.
    let err = load(&fifo).unwrap_err().to_string();
    assert!(err.contains("inventory"), "{err}");
    let err = load(dir.path()).unwrap_err().to_string();
    assert!(err.contains("not a regular file"), "{err}");
    let good = dir.path().join("hosts.yml");
    std::fs::write(&good, "corelane_rx:\n  hosts:\n    10.0.0.2:\n").unwrap();
    assert_eq!(load(&good).unwrap().rx, Some(target("10.0.0.2")));
}

/// The largest files the cap lets in, shaped for quadratic work (one group of 60,000 hosts;
/// a chain of 30,000 children groups above the sender), resolve in well under a second's
/// order, not minutes.
#[test]
fn a_large_inventory_resolves_in_linear_time() {
    let mut wide = String::from("[corelane_rx]\nr\n[corelane_tx]\n");
    wide.extend((0..60_000).map(|i| format!("h{i}\n")));
    let mut chain = String::from("[corelane_rx]\nr\n[g0]\nsender\n");
    chain.extend((1..30_000).map(|i| format!("[g{i}:children]\ng{}\n", i - 1)));
    chain.push_str("[corelane_tx:children]\ng29999\n");
    assert!(wide.len() < MAX_BYTES as usize && chain.len() < MAX_BYTES as usize);
    let started = std::time::Instant::now();
    fails_at(ini(&wide), 3, "holds 60000 hosts (h0, h1, h2, h3, h4 and 59995 more)");
    assert_eq!(ini(&chain).unwrap().tx.first().cloned(), Some(target("sender")));
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}", started.elapsed());
}

mod no_panic {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn ini_never_panics(text in "(\\[[a-z_:]{0,12}\\]?\n|[-a-z0-9_=:\\[\\]'\" #]{0,30}\n){0,12}") {
            let _ = ini(&text);
        }

        #[test]
        fn yaml_never_panics(text in "([ ]{0,6}([-a-z_0-9&*:\\[\\]{},]{0,12}|hosts:|children:|vars:|corelane_tx:|corelane_rx:)( [a-z0-9&*]{0,8})?\n){0,14}") {
            let _ = yaml(&text);
        }

        #[test]
        fn arbitrary_bytes_never_panic(text in ".{0,200}") {
            let _ = ini(&text);
            let _ = yaml(&text);
        }
    }
}
