//! Images taken as the middleware's serialized bytes, straight into page-locked frame
//! buffers that the pipeline uploads from ([`crate::pipeline::FrameBuffer`]): the one copy
//! the take makes lands where the GPU reads, and the pipeline's own copy into pinned memory
//! goes (`image_take: serialized`, docs/ros.md).
//!
//! r2r 0.9.7 has no such take: its serialized subscription copies each message into a new
//! `Vec`, and it keeps its node's rcl handle to itself. So these subscriptions live on an rcl
//! node of their own, in a context of their own (a second DDS participant in the process),
//! made from the process's own arguments and with the node's name: remapping, namespaces and
//! the domain resolve exactly as for the r2r node, and the graph shows the subscriptions
//! under the node's name. It publishes nothing (no rosout) and is waited on by the thread
//! that takes the images ([`ImageSubscriptions::wait`]).
//!
//! The take hands rmw a serialized-message struct whose buffer is a free frame buffer of the
//! input's [`FramePool`]. A message that does not fit makes rmw grow the buffer through the
//! struct's allocator; ours then gives it plain heap memory (the frame buffer itself is never
//! reallocated or freed by rmw), the frame is processed from there with the pipeline's copy,
//! and the pool's buffers grow to the new size between frames ([`FramePool::refill`]).

use std::ffi::{c_void, CString};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use r2r::sensor_msgs::msg::Image;
use r2r::{QosProfile, WrappedTypesupport};
use r2r_rcl as rcl;

use super::image_cdr::{self, ImageFields};
use crate::pipeline::{FrameBuffer, Pipeline};

/// Frame buffers per input: one being processed, one waiting in the slot, one being taken
/// into (a frame that replaces the waiting one frees its buffer).
pub const BUFFERS_PER_INPUT: usize = 3;

/// An input's frame buffers, shared by the thread that takes its images and the one that
/// processes them.
#[derive(Default)]
pub struct FramePool {
    state: Mutex<PoolState>,
}

#[derive(Default)]
struct PoolState {
    free: Vec<FrameBuffer>,
    /// The size of the buffers made, and how many of that size exist.
    size: usize,
    made: usize,
    /// The largest message taken.
    want: usize,
    /// The pipeline could not make them (logged once; frames go through the heap).
    failed: bool,
}

impl FramePool {
    fn get(&self) -> Option<FrameBuffer> {
        self.state.lock().unwrap().free.pop()
    }

    /// A buffer back; one smaller than the current size is dropped (outside the lock).
    fn put(&self, b: FrameBuffer) {
        let mut s = self.state.lock().unwrap();
        if b.len() >= s.size {
            s.free.push(b);
            return;
        }
        drop(s);
        drop(b);
    }

    fn note(&self, len: usize) {
        let mut s = self.state.lock().unwrap();
        s.want = s.want.max(len);
    }

    /// Between frames, on the thread that owns `pipeline`: makes the buffers that messages
    /// of the largest size taken need (after the first frame and when frames grow; 4 KiB of
    /// room for a longer frame id, rounded to 64 KiB). Err (once) when the pipeline cannot.
    pub fn refill(&self, pipeline: &Pipeline) -> Result<(), String> {
        let mut s = self.state.lock().unwrap();
        if s.failed || s.want == 0 || (s.want <= s.size && s.made >= BUFFERS_PER_INPUT) {
            return Ok(());
        }
        if s.want > s.size {
            s.size = (s.want + 4096).next_multiple_of(64 << 10);
            s.free.clear();
            s.made = 0;
        }
        while s.made < BUFFERS_PER_INPUT {
            match pipeline.frame_buffer(s.size) {
                Ok(b) => {
                    s.free.push(b);
                    s.made += 1;
                }
                Err(e) => {
                    s.failed = true;
                    return Err(format!("frame buffers of {} bytes: {e}", s.size));
                }
            }
        }
        Ok(())
    }
}

/// The bytes of a taken message: a pool's frame buffer, or heap memory from rmw's resize.
enum Bytes {
    Pool(FrameBuffer),
    /// `malloc`ed by [`grow`], freed here.
    Heap(*mut u8),
}

/// One serialized Image as taken, with its fields located ([`image_cdr`]).
pub struct SerializedImage {
    bytes: Option<Bytes>,
    len: usize,
    fields: Result<ImageFields, String>,
    pool: Arc<FramePool>,
}

// SAFETY: the heap bytes are a `malloc` block owned by this value alone (freed by `free` on
// any thread); the frame buffer is `Send`.
unsafe impl Send for SerializedImage {}

impl SerializedImage {
    pub fn bytes(&self) -> &[u8] {
        match &self.bytes {
            Some(Bytes::Pool(b)) => &b.as_slice()[..self.len],
            // SAFETY: `len` bytes were written there by rmw's take and live until drop.
            Some(Bytes::Heap(p)) if !p.is_null() => unsafe {
                std::slice::from_raw_parts(*p, self.len)
            },
            _ => &[],
        }
    }

    /// The frame buffer holding the message, when it was taken into one.
    pub fn buffer(&self) -> Option<&FrameBuffer> {
        match &self.bytes {
            Some(Bytes::Pool(b)) => Some(b),
            _ => None,
        }
    }

    pub fn fields(&self) -> Result<&ImageFields, &str> {
        self.fields.as_ref().map_err(|e| e.as_str())
    }

    /// The pool its buffers come from (to refill after the frame).
    pub fn pool(&self) -> &FramePool {
        &self.pool
    }
}

impl Drop for SerializedImage {
    fn drop(&mut self) {
        match self.bytes.take() {
            Some(Bytes::Pool(b)) => self.pool.put(b),
            // SAFETY: a block from `malloc` (`grow`), not freed elsewhere.
            Some(Bytes::Heap(p)) => unsafe { libc::free(p as *mut c_void) },
            None => {}
        }
    }
}

/// The allocator state of a take: the frame buffer that rmw must not free or reallocate.
struct Lent {
    buffer: *mut u8,
    capacity: usize,
}

unsafe extern "C" fn alloc(size: usize, _: *mut c_void) -> *mut c_void {
    libc::malloc(size.max(1))
}

unsafe extern "C" fn zero_alloc(n: usize, size: usize, _: *mut c_void) -> *mut c_void {
    libc::calloc(n.max(1), size.max(1))
}

unsafe extern "C" fn dealloc(p: *mut c_void, state: *mut c_void) {
    let lent = &*(state as *const Lent);
    if p as *mut u8 != lent.buffer {
        libc::free(p);
    }
}

/// rmw's resize: the lent frame buffer is left as it is and heap memory comes instead (its
/// bytes copied, as `realloc` would); heap memory is reallocated.
unsafe extern "C" fn grow(p: *mut c_void, size: usize, state: *mut c_void) -> *mut c_void {
    let lent = &*(state as *const Lent);
    if p.is_null() || p as *mut u8 != lent.buffer {
        return libc::realloc(p, size.max(1));
    }
    let new = libc::malloc(size.max(1));
    if !new.is_null() {
        std::ptr::copy_nonoverlapping(lent.buffer, new as *mut u8, lent.capacity.min(size));
    }
    new
}

fn check(ret: rcl::rcl_ret_t, what: &str) -> Result<(), String> {
    if ret == rcl::RCL_RET_OK as rcl::rcl_ret_t {
        return Ok(());
    }
    Err(rcl_error(ret, what))
}

/// `what`'s failure with rcl's error text (which is then reset).
fn rcl_error(ret: rcl::rcl_ret_t, what: &str) -> String {
    // SAFETY: reads and resets rcutils' thread-local error state.
    let msg = unsafe {
        let s = rcl::rcutils_get_error_string();
        let text = std::ffi::CStr::from_ptr(s.str_.as_ptr()).to_string_lossy().into_owned();
        rcl::rcutils_reset_error();
        text
    };
    format!("{what}: rcl error {ret}: {msg}")
}

/// The serialized Image subscriptions of the node (module docs): their context, node and
/// wait set.
pub struct ImageSubscriptions {
    context: Box<rcl::rcl_context_t>,
    node: Box<rcl::rcl_node_t>,
    subs: Vec<(Box<rcl::rcl_subscription_t>, Arc<FramePool>)>,
    wait_set: Box<rcl::rcl_wait_set_t>,
    lent: Box<Lent>,
}

// SAFETY: rcl's handles are plain heap structs used by one thread at a time (this value is
// moved to the taking thread and used there alone).
unsafe impl Send for ImageSubscriptions {}

impl ImageSubscriptions {
    /// The context and node (`name`, `namespace` before remapping, as given to r2r) and one
    /// subscription to each of `topics`, with `qos`.
    pub fn new(
        name: &str,
        namespace: &str,
        topics: &[String],
        qos: &QosProfile,
    ) -> Result<Self, String> {
        let args: Vec<CString> = std::env::args()
            .map(|a| CString::new(a).map_err(|_| "an argument holds a NUL byte".to_string()))
            .collect::<Result<_, _>>()?;
        let mut argv: Vec<*const std::os::raw::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        // SAFETY: zero-initialised rcl structs, initialised by rcl in order; `argv` and the
        // C strings outlive the calls; every struct is boxed so its address stays put.
        unsafe {
            let mut context = Box::new(rcl::rcl_get_zero_initialized_context());
            let mut opts = rcl::rcl_get_zero_initialized_init_options();
            check(
                rcl::rcl_init_options_init(&mut opts, rcl::rcutils_get_default_allocator()),
                "init options",
            )?;
            let init = rcl::rcl_init(
                args.len() as i32,
                argv.as_ptr(),
                &opts,
                context.as_mut(),
            );
            rcl::rcl_init_options_fini(&mut opts);
            check(init, "rcl_init for the image subscriptions")?;
            let mut this = ImageSubscriptions {
                context,
                node: Box::new(rcl::rcl_get_zero_initialized_node()),
                subs: Vec::new(),
                wait_set: Box::new(rcl::rcl_get_zero_initialized_wait_set()),
                lent: Box::new(Lent {
                    buffer: std::ptr::null_mut(),
                    capacity: 0,
                }),
            };
            let mut node_opts = rcl::rcl_node_get_default_options();
            node_opts.enable_rosout = false;
            let (cname, cns) = (cstr(name)?, cstr(namespace)?);
            check(
                rcl::rcl_node_init(
                    this.node.as_mut(),
                    cname.as_ptr(),
                    cns.as_ptr(),
                    this.context.as_mut(),
                    &node_opts,
                ),
                "rcl_node_init for the image subscriptions",
            )?;
            for topic in topics {
                let mut sub = Box::new(rcl::rcl_get_zero_initialized_subscription());
                let mut sub_opts = rcl::rcl_subscription_get_default_options();
                sub_opts.qos = qos.clone().into();
                let ctopic = cstr(topic)?;
                check(
                    rcl::rcl_subscription_init(
                        sub.as_mut(),
                        this.node.as_ref(),
                        Image::get_ts(),
                        ctopic.as_ptr(),
                        &sub_opts,
                    ),
                    &format!("subscribe {topic}"),
                )?;
                this.subs.push((sub, Arc::new(FramePool::default())));
            }
            check(
                rcl::rcl_wait_set_init(
                    this.wait_set.as_mut(),
                    this.subs.len(),
                    0,
                    0,
                    0,
                    0,
                    0,
                    this.context.as_mut(),
                    rcl::rcutils_get_default_allocator(),
                ),
                "wait set",
            )?;
            Ok(this)
        }
    }

    /// Waits up to `timeout` for a message on any subscription.
    pub fn wait(&mut self, timeout: Duration) {
        // SAFETY: the wait set and subscriptions are initialised and live in `self`.
        unsafe {
            rcl::rcl_wait_set_clear(self.wait_set.as_mut());
            for (s, _) in &self.subs {
                rcl::rcl_wait_set_add_subscription(
                    self.wait_set.as_mut(),
                    s.as_ref(),
                    std::ptr::null_mut(),
                );
            }
            rcl::rcl_wait(self.wait_set.as_mut(), timeout.as_nanos() as i64);
        }
    }

    /// The next message of subscription `i` already received, if any: Ok with the bytes
    /// (its fields located or the reason they are not), Err when rcl fails.
    pub fn try_take(&mut self, i: usize) -> Option<Result<SerializedImage, String>> {
        let (sub, pool) = &self.subs[i];
        let mut buf = pool.get();
        let (ptr, cap) = match buf.as_mut() {
            Some(b) => (b.as_mut_slice().as_mut_ptr(), b.len()),
            None => (std::ptr::null_mut(), 0),
        };
        *self.lent = Lent {
            buffer: ptr,
            capacity: cap,
        };
        let allocator = rcl::rcutils_allocator_t {
            allocate: Some(alloc),
            deallocate: Some(dealloc),
            reallocate: Some(grow),
            zero_allocate: Some(zero_alloc),
            state: self.lent.as_mut() as *mut Lent as *mut c_void,
        };
        let mut msg = rcl::rcl_serialized_message_t {
            buffer: ptr,
            buffer_length: 0,
            buffer_capacity: cap,
            allocator,
        };
        let mut info = rcl::rmw_message_info_t::default();
        // SAFETY: `msg` lends `cap` bytes of the frame buffer (alive in `buf` until below)
        // with an allocator that never frees or reallocates them (`Lent`).
        let ret = unsafe {
            rcl::rcl_take_serialized_message(sub.as_ref(), &mut msg, &mut info, std::ptr::null_mut())
        };
        let heap = (!msg.buffer.is_null() && msg.buffer != ptr).then_some(msg.buffer);
        if ret != rcl::RCL_RET_OK as rcl::rcl_ret_t {
            if let Some(p) = heap {
                // SAFETY: heap memory from `grow`, handed out to nobody.
                unsafe { libc::free(p as *mut c_void) };
            }
            if let Some(b) = buf {
                pool.put(b);
            }
            if ret == rcl::RCL_RET_SUBSCRIPTION_TAKE_FAILED as rcl::rcl_ret_t {
                return None;
            }
            return Some(Err(rcl_error(ret, "take")));
        }
        let bytes = match (heap, buf) {
            (None, Some(b)) => Bytes::Pool(b),
            (heap, b) => {
                if let Some(b) = b {
                    pool.put(b);
                }
                Bytes::Heap(heap.unwrap_or(std::ptr::null_mut()))
            }
        };
        let len = msg.buffer_length;
        pool.note(len);
        let mut img = SerializedImage {
            bytes: Some(bytes),
            len,
            fields: Err(String::new()),
            pool: pool.clone(),
        };
        img.fields = image_cdr::parse(img.bytes());
        Some(Ok(img))
    }
}

fn cstr(s: &str) -> Result<CString, String> {
    CString::new(s).map_err(|_| format!("{s:?} holds a NUL byte"))
}

impl Drop for ImageSubscriptions {
    fn drop(&mut self) {
        // SAFETY: each handle was initialised above (or is zero, which fini accepts), and is
        // finalised once, subscriptions before their node, the node before its context.
        unsafe {
            rcl::rcl_wait_set_fini(self.wait_set.as_mut());
            for (s, _) in &mut self.subs {
                rcl::rcl_subscription_fini(s.as_mut(), self.node.as_mut());
            }
            rcl::rcl_node_fini(self.node.as_mut());
            rcl::rcl_shutdown(self.context.as_mut());
            rcl::rcl_context_fini(self.context.as_mut());
        }
    }
}
