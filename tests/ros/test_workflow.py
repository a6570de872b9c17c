#!/usr/bin/env python3
"""The user's ROS 2 workflow, end to end, with the real tools (loopback only).

    test_workflow.py --root REPO --target-dir DIR

1. `colcon build` of this package in a temporary workspace, as docs/ros.md tells users
   (`--cargo-args --release --features ros`), then checks the install space: the ament index
   entry, share/gpu_features/{launch,config,package.xml}, lib/gpu_features/gpu_features_node.
   The workspace's build/gpu_features (cargo's --target-dir under colcon-ros-cargo) is a
   link to DIR, so a rerun reuses the compiled crates.
2. In the sourced install space: `ros2 launch gpu_features gpu_features.launch.py` and
   `gpu_features.launch.xml` with namespace, remapping and params-file arguments; a frame
   published on the remapped input comes back on the remapped keypoints/edges topics, equal
   to what the installed binary's `--reference` mode gives with the same params file.
3. `ros2 param get/set` on the running node (a valid change applies to the next frame, an
   invalid one is refused with the reason), `ros2 topic hz` on keypoints, `ros2 node info`,
   `ros2 pkg executables`; SIGINT to `ros2 launch` stops the node cleanly.

Cases that need the `ros2` CLI / launch (from ../shared/ros-tools, see scripts/setup-ros.sh)
print SKIPPED when GF_ROS_TOOLS=0. Prints 'N passed, N failed, N skipped' last.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import rclpy
import yaml
from sensor_msgs.msg import Image, PointCloud2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_node as tn  # noqa: E402  (the rclpy harness, reference runner and checks)

PKG = 'gpu_features'
EXE = 'gpu_features_node'


def log(*a):
    print(*a, flush=True)


class Skip(Exception):
    pass


class Runner:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0
        self.blocked = None   # reason later cases cannot run (e.g. the build failed)

    def case(self, name, fn, needs_tools=False, tools=True):
        t0 = time.monotonic()
        if needs_tools and not tools:
            self.skipped += 1
            log(f'SKIPPED {name}: the ros2 CLI and launch are not installed '
                f'(no ../shared/ros-tools; scripts/setup-ros.sh)')
            return
        if self.blocked:
            self.failed += 1
            log(f'FAIL {name}: not run, {self.blocked}')
            return
        try:
            fn()
            self.passed += 1
            log(f'PASS {name} ({time.monotonic() - t0:.1f} s)')
        except Exception as e:  # noqa: BLE001 - report every failure and go on
            self.failed += 1
            log(f'FAIL {name}: {e}')
            import traceback
            traceback.print_exc(file=sys.stdout)


def sourced_env(setup_bash, base_env):
    """The environment after `source setup_bash` in bash (what a user's shell has)."""
    out = subprocess.run(['bash', '-c', f'source "{setup_bash}" >/dev/null 2>&1 && env -0'],
                         env=base_env, capture_output=True, check=True).stdout
    env = {}
    for item in out.split(b'\0'):
        if b'=' in item:
            k, v = item.split(b'=', 1)
            env[k.decode()] = v.decode()
    return env


def run(cmd, env, timeout=60, check=True):
    log('  $ ' + ' '.join(cmd))
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f'{cmd[:3]} exit {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}')
    return r


def check_cloud(msg, ref_cloud):
    """The keypoints cloud equals the library's bytes (whatever fields the layout has)."""
    names = [f.name for f in msg.fields]
    assert names[:2] == ['x', 'y'], names
    assert msg.height == 1 and msg.row_step == msg.point_step * msg.width, \
        (msg.height, msg.row_step, msg.point_step, msg.width)
    data = bytes(msg.data)
    assert data == ref_cloud, (f'keypoints differ from the library: {len(data)} vs '
                               f'{len(ref_cloud)} bytes ({msg.width} points, step {msg.point_step})')
    return msg.width


def set_nested(d, dotted, value):
    *path, last = dotted.split('.')
    for p in path:
        d = d.setdefault(p, {})
    d[last] = value


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--root', required=True)
    ap.add_argument('--target-dir', required=True,
                    help="cargo target dir to reuse as the workspace's build/gpu_features")
    ap.add_argument('--keep', action='store_true', help='keep the temporary workspace')
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    tools = os.environ.get('GF_ROS_TOOLS', '0') == '1'
    base_env = dict(os.environ)
    R = Runner()

    tmp = tempfile.mkdtemp(prefix='gf-ros-ws-')
    ws = os.path.join(tmp, 'ws')
    install = os.path.join(ws, 'install')
    pkg_prefix = os.path.join(install, PKG)
    share = os.path.join(pkg_prefix, 'share', PKG)
    node_bin = os.path.join(pkg_prefix, 'lib', PKG, EXE)
    state = {}

    # ------------------------------------------------------------------ colcon build
    def t_colcon_build():
        os.makedirs(os.path.join(ws, 'src'))
        os.makedirs(os.path.join(ws, 'build'))
        # the package as a user's checkout would be (the working tree itself)
        os.symlink(root, os.path.join(ws, 'src', PKG))
        # cargo's --target-dir under colcon-ros-cargo is build/<pkg>: reuse the cached one
        os.makedirs(args.target_dir, exist_ok=True)
        os.symlink(os.path.abspath(args.target_dir), os.path.join(ws, 'build', PKG))
        cmd = ['colcon', 'build', '--packages-select', PKG,
               '--cargo-args', '--release', '--features', 'ros']
        log('  $ cd ' + ws + ' && ' + ' '.join(cmd))
        t0 = time.monotonic()
        r = subprocess.run(cmd, cwd=ws, env=base_env, capture_output=True, text=True,
                           timeout=3000)
        log(f'  colcon build: exit {r.returncode} in {time.monotonic() - t0:.0f} s')
        if r.returncode != 0:
            R.blocked = 'colcon build failed'
            raise AssertionError(f'colcon build failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}')
        summary = [ln for ln in r.stdout.splitlines() if 'Summary:' in ln]
        assert summary and '1 package finished' in summary[-1], r.stdout[-2000:]
        log('  ' + summary[-1].strip())

    def t_install_layout():
        want = [
            os.path.join(pkg_prefix, 'share', 'ament_index', 'resource_index', 'packages', PKG),
            os.path.join(share, 'package.xml'),
            os.path.join(share, 'launch', 'gpu_features.launch.py'),
            os.path.join(share, 'launch', 'gpu_features.launch.xml'),
            os.path.join(share, 'launch', 'vins_frontend.launch.py'),
            os.path.join(share, 'launch', 'vins_stereo.launch.py'),
            os.path.join(share, 'config', 'vins_frontend_params.yaml'),
            os.path.join(share, 'config', 'gpu_features.yaml'),
            os.path.join(share, 'config', 'default.yaml'),
            os.path.join(install, 'setup.bash'),
            os.path.join(install, 'local_setup.bash'),
        ]
        missing = [p for p in want if not os.path.isfile(p)]
        assert not missing, f'missing from the install space: {missing}'
        assert os.access(node_bin, os.X_OK), f'{node_bin} is not an executable'
        # the installed files are the package's own
        for rel in ('launch/gpu_features.launch.py', 'launch/gpu_features.launch.xml',
                    'config/gpu_features.yaml'):
            with open(os.path.join(root, rel), 'rb') as a, open(os.path.join(share, rel), 'rb') as b:
                assert a.read() == b.read(), f'installed {rel} differs from the source'
        # the binary runs outside the build tree (RPATH / environment of the install)
        env = sourced_env(os.path.join(install, 'setup.bash'), base_env)
        state['env'] = env
        prefixes = env.get('AMENT_PREFIX_PATH', '').split(':')
        assert pkg_prefix in prefixes, f'setup.bash does not put {pkg_prefix} on AMENT_PREFIX_PATH'
        r = run([node_bin, '--help'], env)
        assert 'gpu_features_node' in r.stdout, r.stdout
        log(f'  {os.path.relpath(node_bin, ws)}: {os.path.getsize(node_bin) >> 20} MiB; '
            f'AMENT_PREFIX_PATH starts with {prefixes[0]}')

    R.case('colcon build --packages-select gpu_features --cargo-args --release --features ros',
           t_colcon_build)
    R.case('install space: ament index, share/{launch,config}, lib/gpu_features_node, setup.bash',
           t_install_layout)

    def t_ros2_pkg():
        env = state['env']
        r = run(['ros2', 'pkg', 'prefix', PKG], env)
        assert r.stdout.strip() == pkg_prefix, r.stdout
        r = run(['ros2', 'pkg', 'executables', PKG], env)
        assert f'{PKG} {EXE}' in r.stdout, r.stdout
        log(f'  ros2 pkg executables: {r.stdout.strip()}')
    R.case('ros2 pkg prefix / executables find the installed package', t_ros2_pkg,
           needs_tools=True, tools=tools)

    later = ['ros2 launch gpu_features gpu_features.launch.py (namespace, remaps) round trip',
             'ros2 node info', 'ros2 param get/set', 'ros2 topic hz',
             'SIGINT to ros2 launch',
             'ros2 launch gpu_features gpu_features.launch.xml (params_file, namespace, remaps)',
             'ros2 launch gpu_features vins_frontend.launch.py: /feature_tracker/feature from image + camera_info',
             'ros2 launch gpu_features vins_stereo.launch.py: both cameras in /feature_tracker/feature']
    if not tools or R.blocked:
        for name in later:
            R.case(name, None, needs_tools=True, tools=tools)
        return finish(R, tmp, args.keep, None)

    # ------------------------------------------------------------------ launch
    rclpy.init()
    H = tn.Harness('/')
    ref = tn.Reference(node_bin, tmp)
    img = ref.load_images(['camera.png'])['camera.png']        # 512x512 gray
    frame = tn.to_encoding('camera_mono8', img, 'mono8')       # 256 KiB: fine best effort
    stamp_counter = [5000]

    def next_stamp():
        stamp_counter[0] += 1
        return (stamp_counter[0], 42)

    def compute(params_file, overrides=None):
        tn.PARAMS_FILE = params_file
        return ref.compute([frame], dict(overrides or {}))[frame.name]

    # A params file of the user's own (launch argument params_file), with values that
    # differ from the built-in defaults so that loading it shows in the output.
    with open(os.path.join(root, 'config', 'gpu_features.yaml')) as f:
        custom = yaml.safe_load(f)
    custom_values = {'select.max_keypoints': 300, 'canny.low_threshold': 30.0,
                     'pyramid.levels': 4, 'diagnostics_period': 0.5, 'cuda.device': 1}
    (section,) = custom.keys()
    for k, v in custom_values.items():
        set_nested(custom[section]['ros__parameters'], k, v)
    custom_file = os.path.join(tmp, 'my_params.yaml')
    with open(custom_file, 'w') as f:
        yaml.safe_dump(custom, f)

    class Launched:
        def __init__(self, launch_file, ns, remaps, extra=()):
            self.ns, self.remaps = ns, remaps
            self.fqn = f'/{ns}/gpu_features'
            self.log_path = os.path.join(tmp, f'launch_{ns}.log')
            cmd = ['ros2', 'launch', PKG, launch_file, f'namespace:={ns}'] + \
                  [f'{k}:={v}' for k, v in remaps.items()] + list(extra)
            log('  $ ' + ' '.join(cmd))
            self.logf = open(self.log_path, 'w')
            self.proc = subprocess.Popen(cmd, env=state['env'], stdout=self.logf,
                                         stderr=subprocess.STDOUT, start_new_session=True)
            for t in ('keypoints', 'edges'):
                H.listen(remaps[t], PointCloud2 if t == 'keypoints' else Image)

        def output(self):
            if not self.logf.closed:
                self.logf.flush()
            with open(self.log_path) as f:
                return f.read()

        def wait_up(self):
            if not H.wait_subscribers(self.remaps['image'], timeout=30.0):
                raise AssertionError(f'no subscriber on {self.remaps["image"]}; launch output:\n'
                                     f'{self.output()[-3000:]}')

        def roundtrip(self, want, frame_id='launch'):
            stamp = next_stamp()
            got = H.send_and_wait(self.remaps['image'], frame, stamp, frame_id,
                                  [(self.remaps['keypoints'], PointCloud2),
                                   (self.remaps['edges'], Image)])
            n = check_cloud(got[self.remaps['keypoints']], want[0]) \
                if want is not None else got[self.remaps['keypoints']].width
            if want is not None:
                tn.check_edges(got[self.remaps['edges']], frame, want[1])
            tn.check_header(got[self.remaps['keypoints']], stamp, frame_id)
            return n

        def stop(self):
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGINT)
                try:
                    self.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait()
                    self.logf.close()
                    raise AssertionError('ros2 launch did not stop within 20 s of SIGINT')
            self.logf.close()
            return self.proc.returncode

    def ros2_param(verb, L, *rest, check=True):
        # a fresh CLI process discovers the graph first: retry 'Node not found' a few times
        for attempt in range(4):
            r = run(['ros2', 'param', verb, '--no-daemon', '--spin-time', '2', L.fqn] + list(rest),
                    state['env'], check=False)
            text = (r.stdout + r.stderr).strip()
            if 'Node not found' not in text:
                break
            time.sleep(1.0)
        if check and r.returncode != 0:
            raise AssertionError(f'ros2 param {verb} {rest}: exit {r.returncode}: {text}')
        return text

    def param_get(L, name):
        return ros2_param('get', L, name)

    # ---- launch.py: default (installed) params file, namespace and remaps
    py = {}

    def t_launch_py():
        remaps = {'image': '/gf_wf/cam_py/image_raw', 'keypoints': '/gf_wf/cam_py/features',
                  'edges': '/gf_wf/cam_py/edge_map'}
        L = Launched('gpu_features.launch.py', 'gf_py', remaps)
        py['L'] = L
        L.wait_up()
        installed_params = os.path.join(share, 'config', 'gpu_features.yaml')
        want = compute(installed_params)
        n = L.roundtrip(want)
        log(f'  {remaps["image"]} -> {remaps["keypoints"]} ({n} keypoints), '
            f'{remaps["edges"]}: equal to the library with the installed params file')
        # the node is up with the params file: every value in it is what the node reports
        got = param_get(L, 'pyramid.levels')
        assert got == 'Integer value is: 8', got
        got = param_get(L, 'image_qos.reliability')
        assert got == 'String value is: best_effort', got
    R.case('ros2 launch gpu_features gpu_features.launch.py namespace:=gf_py image:=... '
           'keypoints:=... edges:=...', t_launch_py)

    def t_node_info():
        L = py['L']
        r = run(['ros2', 'node', 'info', '--no-daemon', '--spin-time', '5', L.fqn], state['env'])
        out = r.stdout
        sections = re.split(r'^\s*(Subscribers|Publishers|Service Servers|Service Clients|'
                            r'Action Servers|Action Clients):\s*$', out, flags=re.M)
        sec = {sections[i]: sections[i + 1] for i in range(1, len(sections) - 1, 2)}
        assert out.splitlines()[0].strip() == L.fqn, out[:200]
        assert f'{L.remaps["image"]}: sensor_msgs/msg/Image' in sec.get('Subscribers', ''), out
        pubs = sec.get('Publishers', '')
        for t, ty in ((L.remaps['keypoints'], 'PointCloud2'), (L.remaps['edges'], 'Image'),
                      ('/gf_py/debug_image', 'Image'),
                      ('/diagnostics', 'DiagnosticArray')):
            assert re.search(rf'^\s*{re.escape(t)}: \S+/msg/{ty}\s*$', pubs, re.M), \
                f'{t} ({ty}) not among the publishers:\n{out}'
        for srv in ('get_parameters', 'set_parameters', 'set_parameters_atomically',
                    'list_parameters', 'describe_parameters'):
            assert f'{L.fqn}/{srv}: rcl_interfaces/srv/' in sec.get('Service Servers', ''), out
        log('  ' + ' | '.join(ln.strip() for ln in out.splitlines()[1:8]))
    R.case('ros2 node info: remapped subscriber/publishers, parameter services', t_node_info)

    def t_param_set():
        L = py['L']
        installed_params = os.path.join(share, 'config', 'gpu_features.yaml')
        # a valid change: applies to the next frame
        text = ros2_param('set', L, 'select.max_keypoints', '123')
        assert text == 'Set parameter successful', text
        assert param_get(L, 'select.max_keypoints') == 'Integer value is: 123'
        want = compute(installed_params, {'select.max_keypoints': 123})
        n = L.roundtrip(want)
        assert n == 123, n
        log(f'  set select.max_keypoints 123: next frame has {n} keypoints, equal to the library')
        # an invalid one: refused with the reason, value kept, output unchanged
        text = ros2_param('set', L, 'pyramid.levels', '0', check=False)
        assert text.startswith('Setting parameter failed'), text
        assert 'pyramid.levels' in text and '0' in text, f'no reason given: {text}'
        log(f'  set pyramid.levels 0: {text}')
        text2 = ros2_param('set', L, 'canny.low_threshold', 'high', check=False)
        assert text2.startswith('Setting parameter failed'), text2
        log(f'  set canny.low_threshold high: {text2}')
        text3 = ros2_param('set', L, 'backend', 'cpu', check=False)
        assert text3.startswith('Setting parameter failed'), text3
        log(f'  set backend cpu (read-only): {text3}')
        assert param_get(L, 'pyramid.levels') == 'Integer value is: 8'
        assert L.roundtrip(want) == 123
        # ros2 param describe: the description, the range, the read-only flag.
        text4 = ros2_param('describe', L, 'pyramid.levels', 'image_qos.depth', 'detector.method')
        for want_line in ('Parameter name: pyramid.levels', 'Type: integer',
                          'Min value: 1', 'Max value: 32', 'Read only: true',
                          'one of: fast, harris, none'):
            assert want_line in text4, f'{want_line!r} not in:\n{text4}'
        assert re.search(r'Description: \S', text4), text4
        log('  ros2 param describe: ' + ' | '.join(ln.strip() for ln in text4.splitlines()[:8]))
    R.case('ros2 param set/get: valid change applies to the next frame, invalid ones refused '
           'with the reason', t_param_set)

    def t_topic_hz():
        L = py['L']
        rate = 10.0
        cmd = ['ros2', 'topic', 'hz', '--window', '20', L.remaps['keypoints']]
        log('  $ ' + ' '.join(cmd))
        hz_log = os.path.join(tmp, 'hz.log')
        with open(hz_log, 'w') as f:
            hz = subprocess.Popen(cmd, env=state['env'], stdout=f, stderr=subprocess.STDOUT,
                                  start_new_session=True)
            try:
                time.sleep(3.0)   # let it discover the topic
                pub = H.publisher(L.remaps['image'])
                t_next, t_end, i = time.monotonic(), time.monotonic() + 6.0, 0
                while time.monotonic() < t_end:
                    i += 1
                    pub.publish(H.image_msg(frame, (9000, i), 'hz'))
                    t_next += 1.0 / rate
                    time.sleep(max(0.0, t_next - time.monotonic()))
                time.sleep(0.5)
            finally:
                hz.send_signal(signal.SIGINT)
                try:
                    hz.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(hz.pid, signal.SIGKILL)
                    hz.wait()
        out = open(hz_log).read()
        rates = [float(x) for x in re.findall(r'average rate: ([0-9.]+)', out)]
        assert rates, f'ros2 topic hz printed no rate:\n{out[-2000:]}'
        log(f'  published {i} frames at {rate:.0f} Hz; ros2 topic hz: {rates[-1]:.2f} Hz '
            f'({len(rates)} reports)')
        assert 0.7 * rate <= rates[-1] <= 1.3 * rate, rates
    R.case('ros2 topic hz on keypoints follows the input rate', t_topic_hz)

    def t_stop_py():
        L = py.pop('L')
        rc = L.stop()
        out = L.output()
        assert 'gpu_features_node summary' in out, out[-2000:]
        assert re.search(r'process has finished cleanly', out), out[-2000:]
        assert rc == 0, f'ros2 launch exit {rc}'
        log('  ' + next(ln for ln in out.splitlines() if 'summary' in ln).strip())
    R.case('SIGINT to ros2 launch: node exits cleanly (summary, exit 0)', t_stop_py)

    # ---- launch.xml: the user's params file, another namespace and remaps
    def t_launch_xml():
        remaps = {'image': '/gf_wf/cam_xml/image_raw', 'keypoints': '/gf_wf/cam_xml/features',
                  'edges': '/gf_wf/cam_xml/edge_map'}
        L = Launched('gpu_features.launch.xml', 'gf_xml', remaps,
                     extra=[f'params_file:={custom_file}'])
        try:
            L.wait_up()
            for k, v in custom_values.items():
                got = param_get(L, k)
                kind = 'Integer' if isinstance(v, int) else 'Double'
                assert got == f'{kind} value is: {v}', f'{k}: {got} (params file says {v})'
            log(f'  params from {os.path.basename(custom_file)}: {custom_values}')
            want = compute(custom_file)
            n = L.roundtrip(want, 'xml')
            assert n == 300, n
            log(f'  {remaps["image"]} -> {remaps["keypoints"]} ({n} keypoints), '
                f'{remaps["edges"]}: equal to the library with that params file')
        finally:
            rc = L.stop()
        out = L.output()
        assert 'gpu_features_node summary' in out, out[-2000:]
        assert rc == 0, f'ros2 launch exit {rc}'
    R.case('ros2 launch gpu_features gpu_features.launch.xml namespace:=gf_xml '
           'params_file:=... image:=... (own params file applied)', t_launch_xml)

    # ---- vins_frontend.launch.py: the node as VINS's feature tracker
    def t_vins_frontend():
        from sensor_msgs.msg import CameraInfo, PointCloud
        from rclpy.qos import QoSProfile, ReliabilityPolicy, HistoryPolicy
        img_topic, info_topic = '/gf_wf/vins/image_raw', '/gf_wf/vins/camera_info'
        feat_topic = '/feature_tracker/feature'
        cmd = ['ros2', 'launch', PKG, 'vins_frontend.launch.py', f'image:={img_topic}',
               f'camera_info:={info_topic}', 'feature_format:=vins_mono']
        log('  $ ' + ' '.join(cmd))
        log_path = os.path.join(tmp, 'launch_vins.log')
        logf = open(log_path, 'w')
        proc = subprocess.Popen(cmd, env=state['env'], stdout=logf, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            H.listen(feat_topic, PointCloud)
            if not H.wait_subscribers(img_topic, timeout=30.0):
                raise AssertionError('no subscriber on ' + img_topic + '\n' + open(log_path).read()[-3000:])
            qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             history=HistoryPolicy.KEEP_LAST)
            pub_info = H.node.create_publisher(CameraInfo, info_topic, qos)
            info = CameraInfo()
            info.width, info.height = frame.width, frame.height
            info.distortion_model = 'plumb_bob'
            info.k = [300.0, 0.0, frame.width / 2, 0.0, 300.0, frame.height / 2, 0.0, 0.0, 1.0]
            info.d = [0.0] * 5
            end = time.monotonic() + 10
            while pub_info.get_subscription_count() == 0 and time.monotonic() < end:
                time.sleep(0.05)
            pub_info.publish(info)
            time.sleep(0.3)
            got = None
            for k in range(2):
                got = H.send_and_wait(img_topic, frame, next_stamp(), 'vins', [(feat_topic, PointCloud)])
            msg = got[feat_topic]
            names = [ch.name for ch in msg.channels]
            assert names == ['id_of_point', 'u_of_point', 'v_of_point', 'velocity_x_of_point',
                             'velocity_y_of_point'], names
            assert len(msg.points) > 10 and all(p.z == 1.0 for p in msg.points), len(msg.points)
            log(f'  {img_topic} + {info_topic} -> {feat_topic}: {len(msg.points)} features, '
                f'channels {names}')
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            logf.close()
        assert proc.returncode == 0, f'ros2 launch exit {proc.returncode}'
    R.case('ros2 launch gpu_features vins_frontend.launch.py image:=... camera_info:=... '
           '(VINS-Mono feature layout on /feature_tracker/feature)', t_vins_frontend)

    # ---- vins_stereo.launch.py: two cameras, VINS-Fusion's stereo feature message
    def t_vins_stereo():
        from sensor_msgs.msg import CameraInfo, PointCloud
        from rclpy.qos import QoSProfile, ReliabilityPolicy, HistoryPolicy
        cams = [('/gf_wf/st/cam0/image_raw', '/gf_wf/st/cam0/camera_info'),
                ('/gf_wf/st/cam1/image_raw', '/gf_wf/st/cam1/camera_info')]
        feat_topic = '/gf_wf/st/feature'
        cmd = ['ros2', 'launch', PKG, 'vins_stereo.launch.py', f'feature:={feat_topic}',
               'node_name:=stereo_tracker'] + \
            [f'{k}{i}:={t}' for i, c in enumerate(cams) for k, t in zip(('image', 'camera_info'), c)]
        log('  $ ' + ' '.join(cmd))
        log_path = os.path.join(tmp, 'launch_stereo.log')
        logf = open(log_path, 'w')
        proc = subprocess.Popen(cmd, env=state['env'], stdout=logf, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            H.listen(feat_topic, PointCloud)
            for img, _ in cams:
                if not H.wait_subscribers(img, timeout=30.0):
                    raise AssertionError('no subscriber on ' + img + '\n' + open(log_path).read()[-3000:])
            qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             history=HistoryPolicy.KEEP_LAST)
            info = CameraInfo()
            info.width, info.height = frame.width, frame.height
            info.distortion_model = 'plumb_bob'
            info.k = [300.0, 0.0, frame.width / 2, 0.0, 300.0, frame.height / 2, 0.0, 0.0, 1.0]
            info.d = [0.0] * 5
            for _, t in cams:
                pub_info = H.node.create_publisher(CameraInfo, t, qos)
                end = time.monotonic() + 10
                while pub_info.get_subscription_count() == 0 and time.monotonic() < end:
                    time.sleep(0.05)
                pub_info.publish(info)
            time.sleep(0.3)
            right = H.publisher(cams[1][0])
            got = None
            for k in range(3):
                stamp = next_stamp()
                right.publish(H.image_msg(frame, stamp, 'cam1'))
                time.sleep(0.1)
                got = H.send_and_wait(cams[0][0], frame, stamp, 'cam0', [(feat_topic, PointCloud)])
            msg = got[feat_topic]
            names = [ch.name for ch in msg.channels]
            assert names[:2] == ['id', 'camera'], names
            cameras = sorted(set(msg.channels[1].values))
            assert cameras == [0.0, 1.0] and len(msg.points) > 10, (cameras, len(msg.points))
            log(f'  {cams[0][0]} + {cams[1][0]} -> {feat_topic}: {len(msg.points)} features, '
                f'cameras {cameras}')
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            logf.close()
        assert proc.returncode == 0, f'ros2 launch exit {proc.returncode}'
    R.case('ros2 launch gpu_features vins_stereo.launch.py: both cameras in /feature_tracker/feature',
           t_vins_stereo)

    for L in list(py.values()):
        L.stop()
    H.executor.shutdown(timeout_sec=5.0)
    H.node.destroy_node()
    rclpy.try_shutdown()
    return finish(R, tmp, args.keep, ws)


def finish(R, tmp, keep, ws):
    if keep:
        log(f'workspace kept in {tmp}')
    else:
        # the links first (src/ -> the repo, build/ -> the cached target dir): only they go
        for link in (os.path.join(tmp, 'ws', 'src', PKG), os.path.join(tmp, 'ws', 'build', PKG)):
            if os.path.islink(link):
                os.unlink(link)
        shutil.rmtree(tmp, ignore_errors=True)
    log(f'{R.passed} passed, {R.failed} failed, {R.skipped} skipped')
    return 0 if R.failed == 0 else 1


if __name__ == '__main__':
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)   # DDS threads of the C++ layer abort at interpreter teardown
