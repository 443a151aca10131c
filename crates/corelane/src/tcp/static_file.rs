//! A static file's answer, the same for every backend: its validators (a strong ETag and
//! Last-Modified) from the opened descriptor's fstat, conditional requests in RFC 9110
//! §13.2.2's order, one byte range (206) or the whole file, and the 301 that adds a
//! directory's trailing slash; the files themselves opened beneath the root's descriptor.
//!
//! Several ranges in one request get the whole file (200): the simplest correct answer (RFC
//! 9110 §14.2 lets a server ignore Range), as many servers give when ranges are many, and one
//! a client that asked for several must handle anyway.

use std::fmt::Write as _;
use std::fs::File;
use std::time::{Duration, SystemTime};

use std::os::fd::AsFd;
use std::path::{Component, Path, PathBuf};

#[cfg(test)]
use super::http::FILE_HEADERS;
use super::http::{self, Head, Method, Status};

/// The latest second an HTTP-date can name (9999-12-31T23:59:59Z): a file time outside
/// 1970..=9999 has no Last-Modified (httpdate cannot format it, and must not be asked to).
const LAST_HTTP_DATE: u64 = 253_402_300_799;

/// What identifies one version of a file, taken from the descriptor that is sent from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validators {
    /// Strong: inode, size and modification time to the nanosecond, in hex.
    pub etag: String,
    /// Seconds since the epoch, when the file's time is one an HTTP-date can name.
    pub modified: Option<u64>,
}

impl Validators {
    pub fn of(stat: &rustix::fs::Stat) -> Self {
        let mut etag = String::with_capacity(40);
        let _ = write!(
            etag,
            "\"{:x}-{:x}-{:x}.{:x}\"",
            stat.st_ino, stat.st_size, stat.st_mtime, stat.st_mtime_nsec
        );
        let modified = u64::try_from(stat.st_mtime).ok().filter(|&s| s <= LAST_HTTP_DATE);
        Self { etag, modified }
    }

    fn last_modified(&self) -> Option<String> {
        let secs = self.modified?;
        Some(httpdate::fmt_http_date(SystemTime::UNIX_EPOCH + Duration::from_secs(secs)))
    }
}

/// What a Range header asks of a file `len` bytes long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeAsk {
    /// No range, an invalid one, another unit, or several ranges: the whole file.
    Whole,
    /// One satisfiable range: 206 with these bytes.
    Part(std::ops::Range<u64>),
    /// One range that lies past the end: 416.
    Unsatisfiable,
}

/// Parses `bytes=a-b`, `bytes=a-` or `bytes=-n` (RFC 9110 §14.1.2). Numbers past u64 are read
/// as u64::MAX (a first byte past the end, a last one clamped to the end). One pass, stopping
/// at a second range: thousands of ranges cost no more than the header's bytes.
pub fn parse_range(value: &[u8], len: u64) -> RangeAsk {
    let value = value.trim_ascii();
    let Some(unit) = value.get(..6) else { return RangeAsk::Whole };
    if !unit.eq_ignore_ascii_case(b"bytes=") {
        return RangeAsk::Whole;
    }
    let mut specs =
        value[6..].split(|&b| b == b',').map(<[u8]>::trim_ascii).filter(|s| !s.is_empty());
    let (Some(spec), None) = (specs.next(), specs.next()) else { return RangeAsk::Whole };
    let Some(dash) = spec.iter().position(|&b| b == b'-') else { return RangeAsk::Whole };
    let (first, last) = (&spec[..dash], &spec[dash + 1..]);
    if first.is_empty() {
        return match digits(last) {
            None => RangeAsk::Whole,
            Some(0) => RangeAsk::Unsatisfiable,
            Some(_) if len == 0 => RangeAsk::Unsatisfiable,
            Some(n) => RangeAsk::Part(len.saturating_sub(n)..len),
        };
    }
    let Some(first) = digits(first) else { return RangeAsk::Whole };
    let last = if last.is_empty() { Some(u64::MAX) } else { digits(last) };
    match last {
        None => RangeAsk::Whole,
        Some(last) if last < first => RangeAsk::Whole,
        Some(_) if first >= len => RangeAsk::Unsatisfiable,
        Some(last) => RangeAsk::Part(first..last.min(len - 1) + 1),
    }
}

/// A run of ASCII digits, saturating at u64::MAX.
fn digits(s: &[u8]) -> Option<u64> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0u64, |n, &d| n.saturating_mul(10).saturating_add(u64::from(d - b'0'))))
}

/// The entity tags of an If-Match / If-None-Match list, `*` as itself; stops at the first
/// member that is not one (a malformed list matches nothing past it).
fn entity_tags(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = value;
    std::iter::from_fn(move || {
        rest = rest.trim_ascii_start();
        while let Some(after) = rest.strip_prefix(b",") {
            rest = after.trim_ascii_start();
        }
        if rest.is_empty() {
            return None;
        }
        if let Some(after) = rest.strip_prefix(b"*") {
            rest = after;
            return Some(&b"*"[..]);
        }
        let start = usize::from(rest.starts_with(b"W/")) * 2;
        if rest.get(start) != Some(&b'"') {
            rest = &[];
            return None;
        }
        let close = rest[start + 1..].iter().position(|&b| b == b'"')?;
        let (tag, after) = rest.split_at(start + close + 2);
        rest = after;
        Some(tag)
    })
}

/// Whether a list matches `etag`: strong comparison (If-Match, If-Range) refuses weak tags;
/// weak comparison (If-None-Match) ignores the `W/`.
fn list_matches<'a>(values: impl Iterator<Item = &'a [u8]>, etag: &str, weak: bool) -> bool {
    values.flat_map(entity_tags).any(|tag| {
        if tag == b"*" {
            return true;
        }
        match tag.strip_prefix(b"W/") {
            Some(weak_tag) => weak && weak_tag == etag.as_bytes(),
            None => tag == etag.as_bytes(),
        }
    })
}

/// The request's fields a file answers to, read from its head.
#[derive(Debug, Default)]
struct Asked<'a> {
    range: Field<'a>,
    if_range: Field<'a>,
    if_modified_since: Field<'a>,
    if_unmodified_since: Field<'a>,
    /// Every If-Match / If-None-Match line: a list may span lines.
    if_match: Vec<&'a [u8]>,
    if_none_match: Vec<&'a [u8]>,
}

/// A field that must appear at most once: a repeated one is ignored (RFC 9110 §13.1.3).
#[derive(Debug, Default, Clone, Copy)]
enum Field<'a> {
    #[default]
    Absent,
    One(&'a [u8]),
    Repeated,
}

impl<'a> Field<'a> {
    fn add(&mut self, value: &'a [u8]) {
        *self = match self {
            Self::Absent => Self::One(value),
            _ => Self::Repeated,
        };
    }

    fn one(self) -> Option<&'a [u8]> {
        match self {
            Self::One(v) => Some(v),
            _ => None,
        }
    }

    /// The field as an HTTP-date in seconds; a repeated or invalid one is ignored.
    fn date(self) -> Option<u64> {
        let text = std::str::from_utf8(self.one()?).ok()?;
        let at = httpdate::parse_http_date(text.trim()).ok()?;
        Some(at.duration_since(SystemTime::UNIX_EPOCH).ok()?.as_secs())
    }
}

impl<'a> Asked<'a> {
    /// Reads `head` (a complete head the parser accepted) for the file's fields.
    fn of(head: &'a [u8]) -> Self {
        let mut asked = Self::default();
        let mut headers = [httparse::EMPTY_HEADER; http::MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        if req.parse(head).is_err() {
            return asked;
        }
        for h in req.headers.iter() {
            let name = h.name;
            if name.eq_ignore_ascii_case("range") {
                asked.range.add(h.value);
            } else if name.eq_ignore_ascii_case("if-range") {
                asked.if_range.add(h.value);
            } else if name.eq_ignore_ascii_case("if-modified-since") {
                asked.if_modified_since.add(h.value);
            } else if name.eq_ignore_ascii_case("if-unmodified-since") {
                asked.if_unmodified_since.add(h.value);
            } else if name.eq_ignore_ascii_case("if-match") {
                asked.if_match.push(h.value);
            } else if name.eq_ignore_ascii_case("if-none-match") {
                asked.if_none_match.push(h.value);
            }
        }
        asked
    }
}

/// What a file request is answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Whole,
    Part(std::ops::Range<u64>),
    NotModified,
    PreconditionFailed,
    Unsatisfiable,
}

/// Evaluates the request's conditions and range against a file (RFC 9110 §13.2.2): If-Match
/// (else If-Unmodified-Since) → 412; If-None-Match (else If-Modified-Since) → 304; then
/// If-Range and Range (GET only).
fn evaluate(asked: &Asked<'_>, file: &Validators, len: u64, method: Method) -> Verdict {
    let etag = file.etag.as_str();
    if !asked.if_match.is_empty() {
        if !list_matches(asked.if_match.iter().copied(), etag, false) {
            return Verdict::PreconditionFailed;
        }
    } else if let (Some(since), Some(modified)) = (asked.if_unmodified_since.date(), file.modified)
    {
        if modified > since {
            return Verdict::PreconditionFailed;
        }
    }
    if !asked.if_none_match.is_empty() {
        if list_matches(asked.if_none_match.iter().copied(), etag, true) {
            return Verdict::NotModified;
        }
    } else if let (Some(since), Some(modified)) = (asked.if_modified_since.date(), file.modified) {
        if modified <= since {
            return Verdict::NotModified;
        }
    }
    // Range is defined for GET only (RFC 9110 §14.2); HEAD gets the 200's head.
    let Some(range) = asked.range.one().filter(|_| method == Method::Get) else {
        return Verdict::Whole;
    };
    match asked.if_range {
        Field::Absent => {}
        Field::Repeated => return Verdict::Whole,
        Field::One(validator) => {
            let validator = validator.trim_ascii();
            let current = if validator.starts_with(b"\"") || validator.starts_with(b"W/") {
                // Strong comparison: a weak tag never matches.
                validator == etag.as_bytes()
            } else {
                file.modified.is_some() && asked.if_range.date() == file.modified
            };
            if !current {
                return Verdict::Whole;
            }
        }
    }
    match parse_range(range, len) {
        RangeAsk::Whole => Verdict::Whole,
        RangeAsk::Part(part) => Verdict::Part(part),
        RangeAsk::Unsatisfiable => Verdict::Unsatisfiable,
    }
}

/// A file body to send: the file, the next offset and the end, and the version the head
/// named.
#[derive(Debug)]
pub struct FileBody {
    pub file: File,
    pub offset: u64,
    pub end: u64,
    version: Version,
    started: bool,
}

/// What changes when a file's bytes change: its size and modification time (to the ns). Not
/// the change time: a rename over the file's name or a new link changes it, not the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    size: i64,
    modified: (i64, u64),
}

impl Version {
    // st_mtime_nsec is u64 on this target, i64 on others.
    #[allow(clippy::unnecessary_cast)]
    pub fn of(stat: &rustix::fs::Stat) -> Self {
        Self { size: stat.st_size, modified: (stat.st_mtime, stat.st_mtime_nsec as u64) }
    }
}

impl FileBody {
    /// Whether the file is still the version the head named: true for the first transfer
    /// (taken right after the open that gave the validators), then an fstat before each
    /// later one. A file written while it is sent ends the connection short (an incomplete
    /// response, which clients discard) instead of completing a mix of versions.
    pub fn unchanged(&mut self) -> bool {
        if !self.started {
            self.started = true;
            return true;
        }
        rustix::fs::fstat(&self.file).is_ok_and(|s| Version::of(&s) == self.version)
    }
}

/// How a file request was answered: its status, and the body to send after the head.
#[derive(Debug)]
pub struct Answered {
    pub status: Status,
    pub body: Option<FileBody>,
}

/// A GET or HEAD of a static file, as received.
#[derive(Debug, Clone, Copy)]
pub struct FileRequest<'a> {
    pub target: &'a [u8],
    /// The request's head: read again for its conditions only when `conditional`.
    pub head: &'a [u8],
    pub conditional: bool,
    pub method: Method,
    pub keep: bool,
}

/// Answers a GET or HEAD under `root`: the head into `out`, the body (if any) returned.
pub fn answer(out: &mut Vec<u8>, root: &StaticRoot, req: &FileRequest<'_>, date: &str) -> Answered {
    let FileRequest { target, head, conditional, method, keep } = *req;
    let no_body = method == Method::Head;
    let found = match root.open(target) {
        Ok(Found::File(found)) => found,
        Ok(Found::Directory { location }) => {
            let status = Status::MovedPermanently;
            http::write_error_with(out, status, keep, no_body, date, &[("Location", &location)]);
            return Answered { status, body: None };
        }
        Err(status) => {
            http::write_error(out, status, keep, no_body, date);
            return Answered { status, body: None };
        }
    };
    let len = found.len;
    let verdict = if conditional {
        evaluate(&Asked::of(head), &found.validators, len, method)
    } else {
        Verdict::Whole
    };
    let last_modified = found.validators.last_modified();
    let mut fields: Vec<(&str, &dyn std::fmt::Display)> = Vec::with_capacity(4);
    fields.push(("ETag", &found.validators.etag));
    if let Some(date) = &last_modified {
        fields.push(("Last-Modified", date));
    }
    let (status, range) = match verdict {
        Verdict::Whole => (Status::Ok, 0..len),
        Verdict::Part(part) => (Status::PartialContent, part),
        Verdict::NotModified => {
            let head =
                Head { status: Status::NotModified, content_type: None, content_length: None };
            head.write(out, keep, date, &fields);
            return Answered { status: Status::NotModified, body: None };
        }
        Verdict::PreconditionFailed => {
            http::write_error(out, Status::PreconditionFailed, keep, no_body, date);
            return Answered { status: Status::PreconditionFailed, body: None };
        }
        Verdict::Unsatisfiable => {
            let status = Status::RangeNotSatisfiable;
            let unsatisfied = format!("bytes */{len}");
            http::write_error_with(
                out,
                status,
                keep,
                no_body,
                date,
                &[("Content-Range", &unsatisfied)],
            );
            return Answered { status, body: None };
        }
    };
    let content_range;
    fields.push(("Accept-Ranges", &"bytes"));
    if status == Status::PartialContent {
        content_range = format!("bytes {}-{}/{len}", range.start, range.end - 1);
        fields.push(("Content-Range", &content_range));
    }
    let head = Head {
        status,
        content_type: Some(found.content_type),
        content_length: Some(range.end - range.start),
    };
    head.write(out, keep, date, &fields);
    let body = (method == Method::Get && !range.is_empty()).then_some(FileBody {
        file: found.file,
        offset: range.start,
        end: range.end,
        version: found.version,
        started: false,
    });
    Answered { status, body }
}

/// The Location of a directory named without its trailing slash: the path as received plus
/// `/`. Only ever a path: leading slashes and backslashes collapse into one `/` (`//host`
/// would be another site's address to a browser), and bytes outside visible ASCII are
/// percent-encoded.
pub fn directory_location(raw_path: &[u8]) -> String {
    let rest =
        raw_path.iter().position(|&b| b != b'/' && b != b'\\').map_or(&[][..], |i| &raw_path[i..]);
    let mut location = String::with_capacity(rest.len() + 2);
    location.push('/');
    for &b in rest {
        if b.is_ascii_graphic() {
            location.push(char::from(b));
        } else {
            let _ = write!(location, "%{b:02X}");
        }
    }
    if !location.ends_with('/') {
        location.push('/');
    }
    location
}

/// Static files under one directory, opened through a descriptor held for it.
#[derive(Debug, Clone)]
pub struct StaticRoot {
    dir: std::sync::Arc<std::os::fd::OwnedFd>,
}

/// An opened static file: the file, its length, its Content-Type and its validators, all
/// from the descriptor that is sent from (never a second look at the path).
#[derive(Debug)]
pub struct StaticFile {
    pub file: std::fs::File,
    pub len: u64,
    pub content_type: &'static str,
    pub validators: Validators,
    pub version: Version,
}

/// What a request target names under the root.
#[derive(Debug)]
pub enum Found {
    File(StaticFile),
    /// A directory named without its trailing slash: redirected (301) to this path, so that
    /// its page's relative links resolve under it.
    Directory {
        location: String,
    },
}

impl StaticRoot {
    /// `dir` must be an existing directory; it is opened once here and every file is opened
    /// beneath that descriptor, so renaming or replacing the path later changes nothing.
    pub fn new(dir: &Path) -> std::io::Result<Self> {
        use rustix::fs::{Mode, OFlags};
        let fd = rustix::fs::open(
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            rustix::io::Errno::NOTDIR => std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                format!("{} is not a directory", dir.display()),
            ),
            e => e.into(),
        })?;
        Ok(Self { dir: std::sync::Arc::new(fd) })
    }

    /// Opens the file a request target names, or gives the status that refuses it.
    /// Percent-escapes are decoded and `..` segments refused (403). The open itself is
    /// openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) from the root's descriptor: no path,
    /// symlink or /proc link leads out of the root (403), index.html of a directory included.
    /// O_NONBLOCK, and only regular files are served: a FIFO or device under the root is
    /// answered 404 at once instead of blocking the lane.
    /// A directory named without its trailing slash is not opened but redirected (see
    /// [`Found::Directory`]).
    pub fn open(&self, target: &[u8]) -> Result<Found, Status> {
        let path = target.split(|&b| b == b'?' || b == b'#').next().unwrap_or(b"/");
        let decoded = percent_decode(path).ok_or(Status::BadRequest)?;
        let text = std::str::from_utf8(&decoded).map_err(|_| Status::BadRequest)?;
        if text.contains('\0') {
            return Err(Status::BadRequest);
        }
        let mut rel = PathBuf::new();
        for component in Path::new(text).components() {
            match component {
                Component::Normal(part) => rel.push(part),
                Component::RootDir | Component::CurDir => {}
                Component::ParentDir | Component::Prefix(_) => return Err(Status::Forbidden),
            }
        }
        let rel = if rel.as_os_str().is_empty() { PathBuf::from(".") } else { rel };
        let (fd, stat) = open_beneath(self.dir.as_fd(), &rel)?;
        match rustix::fs::FileType::from_raw_mode(stat.st_mode) {
            rustix::fs::FileType::RegularFile => Ok(Found::File(StaticFile {
                file: fd.into(),
                len: stat.st_size as u64,
                content_type: content_type(&rel),
                validators: Validators::of(&stat),
                version: Version::of(&stat),
            })),
            rustix::fs::FileType::Directory if !path.ends_with(b"/") => {
                Ok(Found::Directory { location: directory_location(path) })
            }
            rustix::fs::FileType::Directory => {
                let (index, stat) = open_beneath(fd.as_fd(), Path::new("index.html"))?;
                if rustix::fs::FileType::from_raw_mode(stat.st_mode)
                    != rustix::fs::FileType::RegularFile
                {
                    return Err(Status::NotFound);
                }
                Ok(Found::File(StaticFile {
                    file: index.into(),
                    len: stat.st_size as u64,
                    content_type: content_type(Path::new("index.html")),
                    validators: Validators::of(&stat),
                    version: Version::of(&stat),
                }))
            }
            _ => Err(Status::NotFound),
        }
    }
}

/// openat2 beneath `dir` (see [`StaticRoot::open`]) and fstat of what it opened.
fn open_beneath(
    dir: std::os::fd::BorrowedFd<'_>,
    rel: &Path,
) -> Result<(std::os::fd::OwnedFd, rustix::fs::Stat), Status> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let fd = rustix::fs::openat2(
        dir,
        rel,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(|e| match e {
        rustix::io::Errno::XDEV | rustix::io::Errno::ACCESS | rustix::io::Errno::PERM => {
            Status::Forbidden
        }
        _ => Status::NotFound,
    })?;
    let stat = rustix::fs::fstat(&fd).map_err(|_| Status::NotFound)?;
    Ok((fd, stat))
}

fn percent_decode(raw: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'%' {
            let hex = raw.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(raw[i]);
            i += 1;
        }
    }
    Some(out)
}

/// The Content-Type of a file, by its extension.
pub fn content_type(path: &Path) -> &'static str {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    match ext.as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "txt" | "md" => "text/plain; charset=utf-8",
        "css" => "text/css",
        "js" | "mjs" => "text/javascript",
        "json" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "ico" => "image/x-icon",
        "wasm" => "application/wasm",
        "pdf" => "application/pdf",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn static_paths_stay_under_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/a b.txt"), "x").unwrap();
        std::fs::write(dir.join("index.html"), "i").unwrap();
        let root = StaticRoot::new(dir).unwrap();
        let opened = |t: &[u8]| match root.open(t)? {
            Found::File(f) => Ok::<_, Status>((f.len, f.content_type)),
            Found::Directory { location } => panic!("redirected to {location}"),
        };
        assert_eq!(opened(b"/sub/a%20b.txt?q").unwrap(), (1, "text/plain; charset=utf-8"));
        assert_eq!(opened(b"/").unwrap(), (1, "text/html; charset=utf-8"));
        assert_eq!(opened(b"/../etc/passwd").unwrap_err(), Status::Forbidden);
        assert_eq!(opened(b"/sub/%2e%2e/%2e%2e/etc/passwd").unwrap_err(), Status::Forbidden);
        assert_eq!(opened(b"/missing").unwrap_err(), Status::NotFound);
        assert_eq!(opened(b"/sub/").unwrap_err(), Status::NotFound);
        assert!(
            matches!(root.open(b"/sub?x"), Ok(Found::Directory { location }) if location == "/sub/")
        );
        assert_eq!(opened(b"/%zz").unwrap_err(), Status::BadRequest);
    }

    fn validators() -> Validators {
        Validators { etag: "\"1-2-3.4\"".into(), modified: Some(1_000_000_000) }
    }

    fn verdict(head: &str, method: Method) -> Verdict {
        let raw = format!("GET / HTTP/1.1\r\nHost: h\r\n{head}\r\n");
        evaluate(&Asked::of(raw.as_bytes()), &validators(), 1000, method)
    }

    #[test]
    fn single_ranges_suffixes_and_open_ends() {
        assert_eq!(parse_range(b"bytes=0-499", 1000), RangeAsk::Part(0..500));
        assert_eq!(parse_range(b"BYTES=500-", 1000), RangeAsk::Part(500..1000));
        assert_eq!(parse_range(b"bytes=-200", 1000), RangeAsk::Part(800..1000));
        assert_eq!(parse_range(b"bytes=-2000", 1000), RangeAsk::Part(0..1000));
        assert_eq!(parse_range(b"bytes=990-5000", 1000), RangeAsk::Part(990..1000));
        assert_eq!(parse_range(b"bytes= 1-1 ,", 1000), RangeAsk::Part(1..2));
        assert_eq!(parse_range(b"bytes=1000-", 1000), RangeAsk::Unsatisfiable);
        assert_eq!(parse_range(b"bytes=-0", 1000), RangeAsk::Unsatisfiable);
        assert_eq!(parse_range(b"bytes=0-", 0), RangeAsk::Unsatisfiable);
        assert_eq!(parse_range(b"bytes=-5", 0), RangeAsk::Unsatisfiable);
        // Numbers past u64: a first byte past any end, a last one clamped to the end.
        let huge = "9".repeat(40);
        assert_eq!(parse_range(format!("bytes={huge}-").as_bytes(), 1000), RangeAsk::Unsatisfiable);
        assert_eq!(
            parse_range(format!("bytes=5-{huge}").as_bytes(), 1000),
            RangeAsk::Part(5..1000)
        );
        assert_eq!(parse_range(format!("bytes=-{huge}").as_bytes(), 1000), RangeAsk::Part(0..1000));
    }

    #[test]
    fn invalid_reversed_foreign_and_many_ranges_get_the_whole_file() {
        for value in [
            "bytes=5-1",
            "bytes=a-b",
            "bytes=",
            "bytes=-",
            "items=0-1",
            "bytes=1-2-3",
            "bytes=0-1,5-6",
            "bytes 0-1",
            "bytes=+1-2",
        ] {
            assert_eq!(parse_range(value.as_bytes(), 1000), RangeAsk::Whole, "{value}");
        }
        let many = format!("bytes={}", vec!["0-0"; 5000].join(","));
        assert_eq!(parse_range(many.as_bytes(), 1000), RangeAsk::Whole);
    }

    #[test]
    fn conditions_follow_rfc_9110_precedence() {
        let tag = "\"1-2-3.4\"";
        let date = "Sun, 09 Sep 2001 01:46:40 GMT"; // 1_000_000_000
        let before = "Sun, 09 Sep 2001 01:46:39 GMT";
        let (get, head) = (Method::Get, Method::Head);
        let cases = [
            (format!("If-None-Match: \"x\", W/{tag}\r\n"), get, Verdict::NotModified),
            ("If-None-Match: *\r\n".to_string(), head, Verdict::NotModified),
            (format!("If-Modified-Since: {date}\r\n"), get, Verdict::NotModified),
            (format!("If-Modified-Since: {before}\r\n"), get, Verdict::Whole),
            // If-None-Match decides; If-Modified-Since is not looked at.
            (
                format!("If-None-Match: \"other\"\r\nIf-Modified-Since: {date}\r\n"),
                get,
                Verdict::Whole,
            ),
            // A list spread over two lines.
            (
                format!("If-None-Match: \"a\"\r\nIf-None-Match: {tag}\r\n"),
                get,
                Verdict::NotModified,
            ),
            // A comma inside a tag is part of it: no fragment of it matches.
            (format!("If-None-Match: \"x,{tag}\r\n"), get, Verdict::Whole),
            (format!("If-Match: W/{tag}\r\n"), get, Verdict::PreconditionFailed),
            (format!("If-Match: {tag}\r\nRange: bytes=0-9\r\n"), get, Verdict::Part(0..10)),
            (format!("If-Unmodified-Since: {before}\r\n"), get, Verdict::PreconditionFailed),
            // If-Match decides before If-None-Match.
            (
                format!("If-Match: \"no\"\r\nIf-None-Match: {tag}\r\n"),
                get,
                Verdict::PreconditionFailed,
            ),
            // Repeated or invalid dates are ignored.
            (
                format!("If-Modified-Since: {date}\r\nIf-Modified-Since: {date}\r\n"),
                get,
                Verdict::Whole,
            ),
            ("If-Modified-Since: yesterday\r\n".to_string(), get, Verdict::Whole),
        ];
        for (headers, method, expected) in cases {
            assert_eq!(verdict(&headers, method), expected, "{headers:?}");
        }
    }

    #[test]
    fn if_range_sends_the_part_only_for_the_same_version() {
        let tag = "\"1-2-3.4\"";
        let date = "Sun, 09 Sep 2001 01:46:40 GMT";
        let range = "Range: bytes=10-19\r\n";
        assert_eq!(
            verdict(&format!("{range}If-Range: {tag}\r\n"), Method::Get),
            Verdict::Part(10..20)
        );
        assert_eq!(
            verdict(&format!("{range}If-Range: {date}\r\n"), Method::Get),
            Verdict::Part(10..20)
        );
        assert_eq!(verdict(&format!("{range}If-Range: \"old\"\r\n"), Method::Get), Verdict::Whole);
        assert_eq!(verdict(&format!("{range}If-Range: W/{tag}\r\n"), Method::Get), Verdict::Whole);
        assert_eq!(
            verdict(&format!("{range}If-Range: Sun, 09 Sep 2001 01:46:41 GMT\r\n"), Method::Get),
            Verdict::Whole
        );
        assert_eq!(verdict(range, Method::Head), Verdict::Whole);
        assert_eq!(verdict("Range: bytes=5000-\r\n", Method::Get), Verdict::Unsatisfiable);
        assert_eq!(
            verdict("Range: bytes=0-1\r\nRange: bytes=2-3\r\n", Method::Get),
            Verdict::Whole
        );
    }

    #[test]
    fn directory_redirects_stay_on_this_site() {
        assert_eq!(directory_location(b"/docs"), "/docs/");
        assert_eq!(directory_location(b"//evil.example"), "/evil.example/");
        assert_eq!(directory_location(b"/\\evil.example"), "/evil.example/");
        assert_eq!(directory_location(b"/a%20b/c"), "/a%20b/c/");
        assert_eq!(directory_location("/é".as_bytes()), "/%C3%A9/");
        assert_eq!(directory_location(b""), "/");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        // Any Range value against any length: a part lies inside the file and is not empty.
        #[test]
        fn any_range_value_is_inside_the_file(value in proptest::collection::vec(any::<u8>(), 0..80), len in any::<u64>()) {
            let mut value = value;
            if value.len() > 3 { value.splice(..0, b"bytes=".iter().copied()); }
            if let RangeAsk::Part(r) = parse_range(&value, len) {
                prop_assert!(r.start < r.end && r.end <= len);
            }
        }

        // Well-formed single ranges give exactly the RFC's bytes.
        #[test]
        fn well_formed_ranges_give_the_rfc_bytes(a in 0u64..2000, b in 0u64..2000, len in 0u64..1500) {
            let ask = parse_range(format!("bytes={a}-{b}").as_bytes(), len);
            let want = if b < a { RangeAsk::Whole } else if a >= len { RangeAsk::Unsatisfiable } else { RangeAsk::Part(a..b.min(len - 1) + 1) };
            prop_assert_eq!(ask, want);
        }

        // Any condition fields are evaluated without a panic.
        #[test]
        fn any_condition_fields_are_answered(fields in proptest::collection::vec((0usize..6, "[ -~]{0,40}"), 0..8)) {
            let head: String = fields.iter().map(|(i, v)| format!("{}: {v}\r\n", FILE_HEADERS[*i])).collect();
            let raw = format!("GET / HTTP/1.1\r\nHost: h\r\n{head}\r\n");
            let _ = evaluate(&Asked::of(raw.as_bytes()), &validators(), 1000, Method::Get);
        }
    }
}
