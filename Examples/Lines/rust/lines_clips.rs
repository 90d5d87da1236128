//! The Lines clips in Rust through libwormhole, with `extern "C"` declarations written by hand
//! against wormhole.h (no crate: it builds offline with `rustc` alone; docs/c.md shows the
//! `bindgen` recipe for crate users). It listens to the Lines mailbox (group
//! group.com.example.lines or $LINES_GROUP, directory "lines", mailbox "toShell": the stored clip
//! at start, then every new one) and prints "REASON JSON" per clip, dispatching the deliveries on
//! its own thread from a poll(2) loop on the context's descriptor; after COUNT clips (default:
//! never) it exits.
//!
//!   rustc -O -o lines-clips lines_clips.rs -L "$(pkg-config --variable=libdir wormhole-1)" -l wormhole
//!   lines-clips [COUNT]
//!
//! "ready" goes to standard error once it listens.
//! SPDX-License-Identifier: Apache-2.0

use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_void};
use std::ptr;

#[allow(non_camel_case_types)]
type wh_status = c_int;
const WH_OK: wh_status = 0;
const WH_LISTEN_STORED_ON_START: u32 = 0x1;

// Opaque handles (never dereferenced here).
#[repr(C)]
struct WhContext(u8);
#[repr(C)]
struct WhMailbox(u8);
#[repr(C)]
struct WhSubscription(u8);
#[repr(C)]
struct WhMessage(u8);
#[repr(C)]
struct WhError(u8);

type MessageHandler = extern "C" fn(message: *const WhMessage, user_data: *mut c_void);
type DestroyNotify = extern "C" fn(user_data: *mut c_void);

#[link(name = "wormhole")]
extern "C" {
    fn wh_context_new(options: *const c_void, context: *mut *mut WhContext, error: *mut *mut WhError) -> wh_status;
    fn wh_context_free(context: *mut WhContext);
    fn wh_context_fd(context: *const WhContext) -> c_int;
    fn wh_context_dispatch(context: *mut WhContext) -> c_int;
    fn wh_mailbox_open(
        context: *mut WhContext, group: *const c_char, directory: *const c_char, mailbox: *mut *mut WhMailbox,
        error: *mut *mut WhError,
    ) -> wh_status;
    fn wh_mailbox_free(mailbox: *mut WhMailbox);
    fn wh_mailbox_listen(
        mailbox: *mut WhMailbox, identifier: *const c_char, flags: u32, handler: MessageHandler,
        user_data: *mut c_void, destroy: Option<DestroyNotify>, subscription: *mut *mut WhSubscription,
        error: *mut *mut WhError,
    ) -> wh_status;
    fn wh_subscription_free(subscription: *mut WhSubscription);
    fn wh_message_json(message: *const WhMessage, length: *mut usize) -> *const c_char;
    fn wh_message_reason(message: *const WhMessage) -> c_int;
    fn wh_error_message(error: *const WhError) -> *const c_char;
    fn wh_error_free(error: *mut WhError);
}

// poll(2), from the C library Rust's standard library links already.
#[repr(C)]
struct PollFd {
    fd: c_int,
    events: i16,
    revents: i16,
}
const POLLIN: i16 = 0x1;
extern "C" {
    fn poll(fds: *mut PollFd, count: u64, timeout: c_int) -> c_int;
}

/// What the handler updates: the count of clips printed.
struct Clips {
    printed: u64,
}

extern "C" fn on_clip(message: *const WhMessage, user_data: *mut c_void) {
    // Runs inside wh_context_dispatch, on the thread that called it (main's).
    let clips = unsafe { &mut *(user_data as *mut Clips) };
    let mut length = 0usize;
    let json = unsafe { wh_message_json(message, &mut length) };
    if json.is_null() {
        return; // the mailbox was cleared
    }
    let bytes = unsafe { std::slice::from_raw_parts(json as *const u8, length) };
    let reason = match unsafe { wh_message_reason(message) } {
        1 => "catchUp",
        2 => "stored",
        4 => "transient",
        _ => "posted",
    };
    println!("{} {}", reason, String::from_utf8_lossy(bytes));
    clips.printed += 1;
}

fn fail(what: &str, error: *mut WhError) -> ! {
    let message = if error.is_null() {
        "?".to_string()
    } else {
        unsafe { CStr::from_ptr(wh_error_message(error)) }.to_string_lossy().into_owned()
    };
    unsafe { wh_error_free(error) };
    eprintln!("lines-clips: {}: {}", what, message);
    std::process::exit(1);
}

fn main() {
    let count: u64 = std::env::args().nth(1).map(|n| n.parse().expect("COUNT is a number")).unwrap_or(u64::MAX);
    let group = CString::new(std::env::var("LINES_GROUP").unwrap_or_else(|_| "group.com.example.lines".into()))
        .expect("the group has no NUL");
    let directory = CString::new("lines").unwrap();
    let identifier = CString::new("toShell").unwrap();
    let mut error: *mut WhError = ptr::null_mut();
    let mut context: *mut WhContext = ptr::null_mut();
    let mut mailbox: *mut WhMailbox = ptr::null_mut();
    let mut subscription: *mut WhSubscription = ptr::null_mut();
    let mut clips = Box::new(Clips { printed: 0 });
    unsafe {
        if wh_context_new(ptr::null(), &mut context, &mut error) != WH_OK {
            fail("cannot reach the bus", error);
        }
        if wh_mailbox_open(context, group.as_ptr(), directory.as_ptr(), &mut mailbox, &mut error) != WH_OK {
            fail("cannot open the wormhole", error);
        }
        let data = &mut *clips as *mut Clips as *mut c_void;
        if wh_mailbox_listen(
            mailbox, identifier.as_ptr(), WH_LISTEN_STORED_ON_START, on_clip, data, None, &mut subscription,
            &mut error,
        ) != WH_OK
        {
            fail("cannot listen", error);
        }
    }
    eprintln!("ready");
    let mut descriptor = PollFd { fd: unsafe { wh_context_fd(context) }, events: POLLIN, revents: 0 };
    while clips.printed < count {
        // Level-triggered: readable while deliveries wait, so each wake dispatches them.
        if unsafe { poll(&mut descriptor, 1, -1) } > 0 {
            unsafe { wh_context_dispatch(context) };
        }
    }
    unsafe {
        wh_subscription_free(subscription);
        wh_mailbox_free(mailbox);
        wh_context_free(context);
    }
}
