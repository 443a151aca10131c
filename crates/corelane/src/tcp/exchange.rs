//! Answering a connection's requests, shared by the epoll and io_uring lanes: the requests
//! parsed from the bytes received, and the responses (ready-made for a fixed body, a head
//! plus a file for static files) queued to be sent.

use std::sync::Arc;
use std::time::Instant;

use super::config::Content;
pub(crate) use super::conn::Exchange;
use super::counters::{bump, ServerCounters};
use super::http::{self, DateCache, Limits, Method, Parsed, Request, Status};
use super::static_file::{self, FileRequest};

/// Ready-made responses for a fixed body, rebuilt when the Date header changes.
#[derive(Debug)]
pub(crate) struct Responder {
    content: Arc<Content>,
    pub limits: Limits,
    date: DateCache,
    /// Date the cached responses carry, and [keep-alive, close] × [GET, HEAD].
    pub cached_date: String,
    cached: [[Vec<u8>; 2]; 2],
}

impl Responder {
    pub fn new(content: Arc<Content>, limits: Limits) -> Self {
        let mut r = Self {
            content,
            limits,
            date: DateCache::default(),
            cached_date: String::new(),
            cached: Default::default(),
        };
        r.refresh(Instant::now());
        r
    }

    pub fn refresh(&mut self, now: Instant) {
        let date = self.date.get(now);
        if date == self.cached_date {
            return;
        }
        self.cached_date = date.to_owned();
        if let Content::Body(body) = &*self.content {
            for (k, keep) in [true, false].into_iter().enumerate() {
                for (m, get) in [true, false].into_iter().enumerate() {
                    let out = &mut self.cached[k][m];
                    out.clear();
                    let len = body.len() as u64;
                    http::write_head(out, Status::Ok, "text/plain", len, keep, &self.cached_date);
                    if get {
                        out.extend_from_slice(body);
                    }
                }
            }
        }
    }

    /// Appends the response to `req` to the connection; a file body is left in `exchange.file`.
    fn respond(
        &mut self,
        exchange: &mut Exchange,
        req: &Request,
        head_start: usize,
        keep: bool,
    ) -> Status {
        let k = usize::from(!keep);
        match (&*self.content, req.method) {
            (_, Method::Other) => {
                http::write_error(
                    &mut exchange.output,
                    Status::MethodNotAllowed,
                    keep,
                    false,
                    &self.cached_date,
                );
                Status::MethodNotAllowed
            }
            (Content::Body(_), method) => {
                let m = usize::from(method == Method::Head);
                exchange.output.extend_from_slice(&self.cached[k][m]);
                Status::Ok
            }
            (Content::Root(root), method) => {
                let file = FileRequest {
                    target: &exchange.input[req.target.clone()],
                    head: &exchange.input[head_start..head_start + req.head_len],
                    conditional: req.conditional,
                    method,
                    keep,
                };
                let answered =
                    static_file::answer(&mut exchange.output, root, &file, &self.cached_date);
                exchange.file = answered.body;
                answered.status
            }
        }
    }
}

/// Answers every complete request in the exchange's input, up to the pending-output cap.
pub(crate) fn answer(
    exchange: &mut Exchange,
    responder: &mut Responder,
    counters: &ServerCounters,
    draining: bool,
    now: Instant,
) {
    // Requests are parsed at an advancing offset and the input is compacted once at the end:
    // compacting after each request would move the whole backlog per request (quadratic in a
    // long pipeline).
    let mut at = 0;
    answer_from(exchange, &mut at, responder, counters, draining, now);
    exchange.consume(at);
}

fn answer_from(
    exchange: &mut Exchange,
    at: &mut usize,
    responder: &mut Responder,
    counters: &ServerCounters,
    draining: bool,
    now: Instant,
) {
    let cap = responder.limits.max_pending_output;
    // Parsing stops while the answers already queued exceed the cap: the rest of the input
    // waits (and the lane stops reading it) until the peer takes what it was sent.
    while !exchange.close_after && exchange.file.is_none() && exchange.output.len() < cap {
        if exchange.skip_body > 0 {
            let n = exchange.skip_body.min((exchange.filled - *at) as u64);
            *at += n as usize;
            exchange.skip_body -= n;
            if exchange.skip_body > 0 {
                return;
            }
            exchange.request_since = None;
        }
        if *at == exchange.filled {
            return;
        }
        let input = &exchange.input[*at..exchange.filled];
        match http::parse_request(input, &responder.limits) {
            Parsed::Partial => {
                exchange.request_since.get_or_insert(now);
                return;
            }
            Parsed::Reject(status) => {
                let head = http::is_head(input);
                http::write_error(
                    &mut exchange.output,
                    status,
                    false,
                    head,
                    &responder.cached_date,
                );
                count_status(counters, status);
                exchange.clock.answered(now);
                exchange.close_after = true;
                *at = exchange.filled;
            }
            Parsed::Request(mut req) => {
                req.target = req.target.start + *at..req.target.end + *at;
                let keep = req.keep_alive && !draining;
                let status = responder.respond(exchange, &req, *at, keep);
                count_status(counters, status);
                exchange.clock.answered(now);
                *at += req.head_len;
                exchange.skip_body = req.body_len;
                if req.body_len > 0 {
                    // The request's clock runs on until its body is in.
                    exchange.request_since.get_or_insert(now);
                } else {
                    exchange.request_since = None;
                }
                if !keep {
                    exchange.close_after = true;
                }
            }
        }
    }
}

pub(crate) fn count_status(counters: &ServerCounters, status: Status) {
    bump(&counters.requests, 1);
    match status.code() {
        400..=499 => bump(&counters.client_errors, 1),
        500..=599 => bump(&counters.server_errors, 1),
        _ => {}
    }
}
