//! Giving up root once a server has bound its port, as nginx, lighttpd and Apache do: the
//! supplementary groups emptied, then the gid, then the uid of every thread, checked to be
//! irreversible (setuid(0) fails, no capability left, no_new_privs set).

use serde::Serialize;

use crate::sys::privilege as sys;

/// The user a server runs as once its port is bound (`--user NAME`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    name: String,
    ids: sys::Ids,
}

/// Who the process runs as after [`RunAs::become_user`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Identity {
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    /// Still root: `--user root`, or a user whose uid is 0.
    pub root: bool,
}

/// Why the server cannot run as the user it was told to.
#[derive(Debug, thiserror::Error)]
pub enum PrivilegeError {
    #[error(
        "--user {0}: no such user (name an existing user, such as nobody; --user root keeps root)"
    )]
    NoSuchUser(String),
    #[error("--user {name}: cannot read the user database ({source})")]
    Lookup { name: String, source: std::io::Error },
    #[error("cannot give up root for {name} ({what}: {source}); nothing was served")]
    Drop { name: String, what: &'static str, source: std::io::Error },
    #[error("gave up root for {name} but {what}; refusing to serve")]
    Incomplete { name: String, what: String },
}

impl RunAs {
    /// Looks `name` up in the user database (NSS included).
    pub fn lookup(name: &str) -> Result<Self, PrivilegeError> {
        match sys::lookup_user(name) {
            Ok(Some(ids)) => Ok(Self { name: name.to_string(), ids }),
            Ok(None) => Err(PrivilegeError::NoSuchUser(name.chars().take(64).collect())),
            Err(source) => Err(PrivilegeError::Lookup { name: name.to_string(), source }),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether this user is root (uid 0), so that nothing would be given up.
    pub fn is_root(&self) -> bool {
        self.ids.uid == 0
    }

    /// Becomes this user, for every thread of the process, if the process runs as root; a
    /// process that is not root has nothing to give up and stays who it is. Then checks that
    /// the change holds: every id is the user's, no supplementary group, no capability, and
    /// setuid(0) fails.
    pub fn become_user(&self) -> Result<Identity, PrivilegeError> {
        let uid = rustix::process::geteuid().as_raw();
        if uid != 0 || self.is_root() {
            let user = sys::user_name(uid).unwrap_or_else(|| uid.to_string());
            let gid = rustix::process::getegid().as_raw();
            return Ok(Identity { user, uid, gid, root: uid == 0 });
        }
        rustix::thread::set_no_new_privs(true)
            .map_err(|e| self.failed("prctl(PR_SET_NO_NEW_PRIVS)")(e.into()))?;
        sys::become_user(self.ids).map_err(self.failed("setgroups, setgid, setuid"))?;
        self.check_dropped()?;
        Ok(Identity { user: self.name.clone(), uid: self.ids.uid, gid: self.ids.gid, root: false })
    }

    /// A failed call, named, as the error.
    fn failed(&self, what: &'static str) -> impl Fn(std::io::Error) -> PrivilegeError + '_ {
        move |source| PrivilegeError::Drop { name: self.name.clone(), what, source }
    }

    fn check_dropped(&self) -> Result<(), PrivilegeError> {
        let incomplete =
            |what: String| PrivilegeError::Incomplete { name: self.name.clone(), what };
        let (uids, gids, groups) = sys::current_ids().map_err(self.failed("getresuid"))?;
        if uids != [self.ids.uid; 3] || gids != [self.ids.gid; 3] || groups != 0 {
            return Err(incomplete(format!(
                "the ids are uid {uids:?} gid {gids:?} with {groups} groups"
            )));
        }
        let caps =
            rustix::thread::capabilities(None).map_err(|e| self.failed("capget")(e.into()))?;
        if !(caps.effective.is_empty() && caps.permitted.is_empty() && caps.inheritable.is_empty())
        {
            return Err(incomplete(format!("capabilities remain ({caps:?})")));
        }
        if sys::can_become_root() {
            return Err(incomplete("setuid(0) still succeeds".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_are_looked_up_and_unknown_ones_refused() {
        let root = RunAs::lookup("root").unwrap();
        assert!(root.is_root());
        let err = RunAs::lookup("surely-no-such-user-corelane").unwrap_err();
        assert!(err.to_string().contains("no such user"), "{err}");
        assert!(matches!(RunAs::lookup("a\0b"), Err(PrivilegeError::NoSuchUser(_))));
    }

    /// `--user root` gives nothing up (the test process stays root, as it must).
    #[test]
    fn root_keeps_root_and_says_so() {
        let who = RunAs::lookup("root").unwrap().become_user().unwrap();
        assert_eq!(who.uid, rustix::process::geteuid().as_raw());
        assert_eq!(who.root, who.uid == 0);
    }
}
