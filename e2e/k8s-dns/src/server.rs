//! Serving DNS over UDP and TCP: [`bind`] the sockets, [`serve_udp`] and
//! [`serve_tcp`] answer every query through a [`Resolver`].
//!
//! Wire rules: one question per query (else FORMERR), opcode QUERY only
//! (else NOTIMP), class IN (else REFUSED); an EDNS OPT in a query gets one
//! in the reply (version 0, else BADVERS). Over UDP an answer larger than
//! 512 bytes, or than the client's EDNS payload size, is sent with TC and
//! the question only, so the client retries over TCP (2-byte length
//! framing, several queries per connection, closed when idle). A packet
//! that does not parse gets FORMERR if it has a query header, and is
//! dropped otherwise; responses are never answered.

use std::net::SocketAddr;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::DNSClass;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

use crate::records::{Zone, resolve};
use crate::view::View;

/// The EDNS payload size this server advertises and the most it sends over
/// UDP (the DNS flag day 2020 value: no IP fragmentation).
pub const MAX_UDP_PAYLOAD: u16 = 1232;
/// A UDP answer's limit without EDNS (RFC 1035).
const CLASSIC_UDP_LIMIT: usize = 512;
/// A TCP connection idle this long is closed.
const TCP_IDLE: Duration = Duration::from_secs(10);

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The UDP socket could not be bound.
    #[error("cannot bind UDP {addr}")]
    BindUdp {
        /// The address.
        addr: SocketAddr,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The TCP listener could not be bound.
    #[error("cannot listen on TCP {addr}")]
    BindTcp {
        /// The address.
        addr: SocketAddr,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// The view shared between the watches (writer) and the server (readers).
pub type SharedView = Arc<RwLock<View>>;

/// Answers queries from the current view of the cluster.
#[derive(Debug)]
pub struct Resolver {
    view: SharedView,
    zone: Zone,
}

impl Resolver {
    /// A resolver of `zone` over `view`.
    pub fn new(view: SharedView, zone: Zone) -> Self {
        Self { view, zone }
    }

    /// The reply to the query `packet` (a DNS message), or `None` if it
    /// gets none. `udp` applies the UDP size limit.
    pub fn reply(&self, packet: &[u8], udp: bool) -> Option<Vec<u8>> {
        let request = match Message::from_vec(packet) {
            Ok(request) => request,
            Err(e) => {
                tracing::debug!("malformed query ({} bytes): {e}", packet.len());
                return formerr(packet);
            }
        };
        if request.metadata.message_type != MessageType::Query {
            return None;
        }
        let response = self.answer(&request);
        let bytes = response.to_vec().ok().or_else(|| {
            let failed =
                Message::error_msg(request.metadata.id, OpCode::Query, ResponseCode::ServFail);
            failed.to_vec().ok()
        })?;
        if udp && bytes.len() > udp_limit(&request) {
            return truncated(response);
        }
        Some(bytes)
    }

    fn answer(&self, request: &Message) -> Message {
        let id = request.metadata.id;
        let mut response = Message::response(id, request.metadata.op_code);
        response.metadata.recursion_desired = request.metadata.recursion_desired;
        response.metadata.checking_disabled = request.metadata.checking_disabled;
        response.add_queries(request.queries.iter().cloned());
        if let Some(req_edns) = &request.edns {
            let mut edns = Edns::new();
            edns.set_max_payload(MAX_UDP_PAYLOAD);
            response.set_edns(edns);
            if req_edns.version() > 0 {
                response.metadata.response_code = ResponseCode::BADVERS;
                return response;
            }
        }
        let code = if request.metadata.op_code != OpCode::Query {
            Some(ResponseCode::NotImp)
        } else if request.queries.len() != 1 {
            Some(ResponseCode::FormErr)
        } else {
            None
        };
        if let Some(code) = code {
            response.metadata.response_code = code;
            return response;
        }
        let Some(query) = request.queries.first() else {
            return response;
        };
        if !matches!(query.query_class(), DNSClass::IN | DNSClass::ANY) {
            response.metadata.response_code = ResponseCode::Refused;
            return response;
        }
        let answer = {
            let view = self.view.read().unwrap_or_else(PoisonError::into_inner);
            resolve(&view, &self.zone, query.name(), query.query_type())
        };
        response.metadata.response_code = answer.rcode;
        response.metadata.authoritative = answer.authoritative;
        response.answers = answer.answers;
        response.authorities = answer.authorities;
        response.additionals = answer.additionals;
        response
    }
}

/// The UDP size limit of a reply to `request`.
fn udp_limit(request: &Message) -> usize {
    match &request.edns {
        Some(edns) => usize::from(edns.max_payload().clamp(512, MAX_UDP_PAYLOAD)),
        None => CLASSIC_UDP_LIMIT,
    }
}

/// `response` with TC set and only its question and OPT.
fn truncated(mut response: Message) -> Option<Vec<u8>> {
    response.metadata.truncation = true;
    response.answers.clear();
    response.authorities.clear();
    response.additionals.clear();
    response.to_vec().ok()
}

/// FORMERR for an unparsable query that has a query header (ID, QR = 0);
/// `None` for anything shorter or for a response.
fn formerr(packet: &[u8]) -> Option<Vec<u8>> {
    let [id_high, id_low, flags, ..] = *packet else {
        return None;
    };
    if packet.len() < 12 || flags & 0x80 != 0 {
        return None;
    }
    let id = u16::from_be_bytes([id_high, id_low]);
    let op_code = OpCode::from_u8((flags >> 3) & 0x0f);
    Message::error_msg(id, op_code, ResponseCode::FormErr)
        .to_vec()
        .ok()
}

/// Binds UDP and TCP on `addr`.
pub async fn bind(addr: SocketAddr) -> Result<(UdpSocket, TcpListener), ServerError> {
    let udp = UdpSocket::bind(addr)
        .await
        .map_err(|source| ServerError::BindUdp { addr, source })?;
    let tcp = TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::BindTcp { addr, source })?;
    Ok((udp, tcp))
}

/// Answers the queries that arrive on `socket`, forever.
pub async fn serve_udp(socket: UdpSocket, resolver: Arc<Resolver>) {
    let mut buf = vec![0u8; 65535];
    loop {
        let (len, peer) = match socket.recv_from(&mut buf).await {
            Ok(got) => got,
            Err(e) => {
                tracing::warn!("UDP receive: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let Some(packet) = buf.get(..len) else {
            continue;
        };
        if let Some(reply) = resolver.reply(packet, true)
            && let Err(e) = socket.send_to(&reply, peer).await
        {
            tracing::debug!("UDP send to {peer}: {e}");
        }
    }
}

/// Accepts TCP connections on `listener` and answers their queries,
/// forever.
pub async fn serve_tcp(listener: TcpListener, resolver: Arc<Resolver>) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let resolver = Arc::clone(&resolver);
                tokio::spawn(async move {
                    if let Err(e) = connection(stream, &resolver).await {
                        tracing::debug!("TCP {peer}: {e}");
                    }
                });
            }
            Err(e) => {
                tracing::warn!("TCP accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Serves one TCP connection until the client closes it, idles or sends a
/// query that gets no reply.
async fn connection(mut stream: TcpStream, resolver: &Resolver) -> std::io::Result<()> {
    let mut buf = Vec::new();
    loop {
        let len = match tokio::time::timeout(TCP_IDLE, stream.read_u16()).await {
            Ok(Ok(len)) => usize::from(len),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Ok(()),
        };
        buf.resize(len, 0);
        match tokio::time::timeout(TCP_IDLE, stream.read_exact(&mut buf)).await {
            Ok(read) => read?,
            Err(_) => return Ok(()),
        };
        let Some(reply) = resolver.reply(&buf, false) else {
            return Ok(());
        };
        let Ok(reply_len) = u16::try_from(reply.len()) else {
            return Ok(());
        };
        let mut framed = Vec::with_capacity(reply.len() + 2);
        framed.extend_from_slice(&reply_len.to_be_bytes());
        framed.extend_from_slice(&reply);
        stream.write_all(&framed).await?;
    }
}
