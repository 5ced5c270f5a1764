//! Raw Ethernet frames out of a pod's `eth0` (AF_PACKET, from a thread
//! inside the pod's netns), what comes back, and what the host stack
//! receives on a host veth.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use sarena_test_support::{Pod, in_netns};

/// An AF_PACKET socket for the EtherType `proto` (`ETH_P_ALL`: every frame)
/// bound to the interface `ifname` of the calling thread's netns; the fd
/// and its address.
///
/// # Safety
/// Plain socket calls; the caller closes the fd.
unsafe fn packet_socket_on(ifname: &str, proto: u16) -> (i32, libc::sockaddr_ll) {
    let name = CString::new(ifname).unwrap();
    // SAFETY: see the function's contract.
    unsafe {
        let proto = proto.to_be();
        let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(proto));
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let ifindex = libc::if_nametoindex(name.as_ptr());
        assert!(ifindex > 0, "no interface {ifname}");
        let mut addr: libc::sockaddr_ll = std::mem::zeroed();
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = proto;
        addr.sll_ifindex = ifindex as i32;
        addr.sll_halen = 6;
        let bound = libc::bind(
            fd,
            (&raw const addr).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        );
        assert_eq!(bound, 0, "bind: {}", std::io::Error::last_os_error());
        (fd, addr)
    }
}

/// An AF_PACKET socket for every frame on the calling thread's `eth0`.
///
/// # Safety
/// Plain socket calls; the caller closes the fd.
unsafe fn packet_socket() -> (i32, libc::sockaddr_ll) {
    // SAFETY: see the function's contract.
    unsafe { packet_socket_on("eth0", libc::ETH_P_ALL as u16) }
}

/// Sends `frames` from `fd` to `addr`.
///
/// # Safety
/// `fd` is an open packet socket.
unsafe fn send(fd: i32, addr: &libc::sockaddr_ll, frames: &[Vec<u8>]) {
    for frame in frames {
        // SAFETY: valid buffer and address, see the function's contract.
        let sent = unsafe {
            libc::sendto(
                fd,
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert!(
            sent == frame.len() as isize,
            "sendto: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Sends raw Ethernet frames out of the pod's `eth0`.
pub fn send_raw_frames(pod: &Pod, frames: Vec<Vec<u8>>) {
    send_raw_frames_in(&pod.netns.path(), frames);
}

/// Sends raw Ethernet frames out of `eth0` of the netns at `netns`.
pub fn send_raw_frames_in(netns: &Path, frames: Vec<Vec<u8>>) {
    in_netns(netns, move || {
        // SAFETY: plain socket calls; the fd is closed below.
        unsafe {
            let (fd, addr) = packet_socket();
            send(fd, &addr, &frames);
            libc::close(fd);
        }
    })
    .join()
    .unwrap();
}

/// Sends `frame` out of the pod's `eth0` and returns the first frame that
/// arrives on it (not one it sent) within a second and that `wanted`
/// accepts.
pub fn exchange_raw(pod: &Pod, frame: Vec<u8>, wanted: fn(&[u8]) -> bool) -> Option<Vec<u8>> {
    in_netns(&pod.netns.path(), move || {
        // SAFETY: plain socket calls with valid buffers; the fd is closed below.
        unsafe {
            let (fd, addr) = packet_socket();
            let timeout = libc::timeval {
                tv_sec: 0,
                tv_usec: 200_000,
            };
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&raw const timeout).cast(),
                std::mem::size_of::<libc::timeval>() as u32,
            );
            send(fd, &addr, &[frame]);
            let deadline = Instant::now() + Duration::from_secs(1);
            let mut found = None;
            while found.is_none() && Instant::now() < deadline {
                let mut buf = vec![0u8; 2048];
                let mut from: libc::sockaddr_ll = std::mem::zeroed();
                let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
                let n = libc::recvfrom(
                    fd,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    0,
                    (&raw mut from).cast(),
                    &mut len,
                );
                if n > 0 && from.sll_pkttype != libc::PACKET_OUTGOING {
                    buf.truncate(n as usize);
                    if wanted(&buf) {
                        found = Some(buf);
                    }
                }
            }
            libc::close(fd);
            found
        }
    })
    .join()
    .unwrap()
}

/// Every frame arriving on a pod's `eth0`: an AF_PACKET socket opened in
/// the pod's netns (it stays bound to that `eth0` whatever thread reads it).
pub struct PodListener(OwnedFd);

impl PodListener {
    /// Listens on `pod`'s `eth0` from now on.
    pub fn new(pod: &Pod) -> PodListener {
        let fd = in_netns(&pod.netns.path(), || {
            // SAFETY: plain socket calls; the fd is owned from here on.
            unsafe { OwnedFd::from_raw_fd(packet_socket().0) }
        })
        .join()
        .unwrap();
        PodListener(fd)
    }

    /// Every frame that arrived (not one the pod sent) since the last call.
    pub fn arrived(&self) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        loop {
            let mut buf = vec![0u8; 2048];
            // SAFETY: valid buffers of their lengths on an open socket.
            let n = unsafe {
                let mut from: libc::sockaddr_ll = std::mem::zeroed();
                let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
                let n = libc::recvfrom(
                    self.0.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                    (&raw mut from).cast(),
                    &mut len,
                );
                if n > 0 && from.sll_pkttype == libc::PACKET_OUTGOING {
                    continue;
                }
                n
            };
            if n < 0 {
                return got;
            }
            buf.truncate(n as usize);
            got.push(buf);
        }
    }
}

/// What the host stack is handed on a host veth, by EtherType: one packet
/// socket per EtherType, bound to that veth in the test's own netns. A
/// socket for one EtherType receives a frame after the veth's tc ingress
/// hook has passed it (one for every EtherType, `ETH_P_ALL`, would see it
/// before), so a frame a program drops never arrives here.
pub struct HostListener {
    sockets: Vec<(u16, OwnedFd)>,
}

impl HostListener {
    /// Listens on `ifname` for frames of each of `ether_types` (the
    /// protocol the host stack sees: a VLAN-tagged frame's inner one,
    /// `ETH_P_802_2` for an 802.3 frame with an LLC header).
    pub fn new(ifname: &str, ether_types: &[u16]) -> HostListener {
        let sockets = ether_types
            .iter()
            .map(|&ether_type| {
                // SAFETY: plain socket calls; the fd is owned from here on.
                let fd = unsafe { OwnedFd::from_raw_fd(packet_socket_on(ifname, ether_type).0) };
                (ether_type, fd)
            })
            .collect();
        HostListener { sockets }
    }

    /// The EtherType of every frame received since the last call, one entry
    /// per frame.
    pub fn received(&self) -> Vec<u16> {
        let mut got = Vec::new();
        let mut buf = [0u8; 2048];
        for (ether_type, fd) in &self.sockets {
            // SAFETY: a valid buffer of its length on an open socket.
            while unsafe {
                libc::recv(
                    fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            } >= 0
            {
                got.push(*ether_type);
            }
        }
        got
    }
}
