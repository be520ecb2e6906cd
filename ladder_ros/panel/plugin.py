"""The operator panel as an rqt plugin (``rqt --standalone ladder_ros.panel`` or rqt's Plugins menu).

rqt gives the plugin a node that it spins in its own thread; the panel's bridge uses that node and
hands what arrives to the GUI thread through its inbox. Arguments come after ``--args``:
``rqt --standalone ladder_ros_operator_panel --args --namespace /franka --plan eval.yaml``.
``qt_gui`` comes with rqt on the robot; it is not on PyPI, so this module is imported only there.
"""

from __future__ import annotations

from qt_gui.plugin import Plugin

from ladder_ros.panel.app import build_panel, parse_plugin_args


class OperatorPanelPlugin(Plugin):
    def __init__(self, context):
        super().__init__(context)
        self.setObjectName("LadderOperatorPanel")
        args = parse_plugin_args(context.argv())
        self._bridge, self._controller, self._widget = build_panel(context.node, args)
        if context.serial_number() > 1:
            self._widget.setWindowTitle(f"{self._widget.windowTitle()} ({context.serial_number()})")
        context.add_widget(self._widget)

    def shutdown_plugin(self):
        self._widget.close_panel()
        self._bridge.close()
