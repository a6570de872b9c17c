"""Start gpu_features_node with config/gpu_features.yaml.

    ros2 launch gpu_features gpu_features.launch.py \
        image:=/camera/image_raw keypoints:=/camera/keypoints namespace:=front

Arguments: params_file, namespace, node_name, image, keypoints, edges, debug_image,
diagnostics (each topic argument is a remapping of the node's relative topic name).
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    default_params = os.path.join(
        get_package_share_directory('gpu_features'), 'config', 'gpu_features.yaml')
    topics = ['image', 'keypoints', 'edges', 'debug_image']
    args = [
        DeclareLaunchArgument('params_file', default_value=default_params,
                              description='ROS params file (node_name: ros__parameters:)'),
        DeclareLaunchArgument('namespace', default_value='',
                              description='namespace of the node and its relative topics'),
        DeclareLaunchArgument('node_name', default_value='gpu_features',
                              description='node name (must match the params file section)'),
        DeclareLaunchArgument('diagnostics', default_value='/diagnostics',
                              description='diagnostics topic'),
    ] + [
        DeclareLaunchArgument(t, default_value=t, description=f'remap the {t} topic')
        for t in topics
    ]
    node = Node(
        package='gpu_features',
        executable='gpu_features_node',
        name=LaunchConfiguration('node_name'),
        namespace=LaunchConfiguration('namespace'),
        parameters=[LaunchConfiguration('params_file')],
        remappings=[(t, LaunchConfiguration(t)) for t in topics]
        + [('/diagnostics', LaunchConfiguration('diagnostics'))],
        output='screen',
        emulate_tty=True,
    )
    return LaunchDescription(args + [node])
