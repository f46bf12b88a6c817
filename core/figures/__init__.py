"""Pure functions from arrays to figures (plotly, and the canvas heatmap's specs), testable without Streamlit. Above
core.lessons: a figure draws what a lesson computed; nothing below imports a figure.
"""
